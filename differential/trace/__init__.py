"""Traces: immutable arranged batches, vectorized cursors, and the spine.

Layer: differential. Storage only; knows nothing of scheduling or operators.
"""

from differential.trace.batch import Batch, Description, key_hash
from differential.trace.cursor import Matches, seek
from differential.trace.spine import Spine, TraceHandle

__all__ = ["Batch", "Description", "Matches", "Spine", "TraceHandle", "key_hash", "seek"]
