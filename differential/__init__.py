"""differential: the incremental substrate.

Layer: bottom. Timestamps and frontiers (`time`), columnar updates and their
consolidation (`batch`), traces and arrangements (`trace/`), operators
(`operators/`) and the scheduler (`dataflow`). It knows nothing of Datalog and
imports only numpy and the standard library.
"""
