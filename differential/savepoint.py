"""A savepoint: the state of some dataflows and inputs, restored exactly after a
hypothetical epoch has run through them (docs/adr/0052).

Layer: differential. Imports numpy and the trace modules.

A `Savepoint` walks the objects reachable from its roots (dataflows, views, inputs)
once and records, for each stateful object, its attributes by reference, and for
each list, dict, set and deque its contents by reference. `restore` puts them all
back, in place (a container shared by several objects stays one object).

What makes this enough, and cheap:

- Values are immutable and kept by reference, never copied or walked: numpy arrays,
  `Updates`, `Batch` (with its `Description`), scalars and strings. What a batch
  builds lazily from its own contents (`LookupCache`: counters, a hash index, a
  bitmap, Python lists of it) describes that batch forever; a hypothetical that
  builds some leaves a faster, never a different, batch.
- Only objects of this layer and of `joins` are walked (their operators, traces,
  queues and views); the engine, functions and closures, and objects of other
  layers are not (the engine's own lists are not changed by running an epoch: its
  caller restores what it adds).
- Two structures change arrays in place, and each has its own undo:
  `KeySet` (a growing distinct's keys: `KeySet.mark` / `rollback`, which clears
  exactly the slots taken since), and a trace's `Sieve` (a Bloom filter: bits set
  for keys that then vanish make it pass a few more keys, never fewer, so it stays
  exact; its count is restored).

The walk is over the state of the dataflows the epoch runs, not over the data: a
spine is a handful of objects whatever its size (its batches are values).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from functools import partial
from types import BuiltinFunctionType, FunctionType, MethodType, ModuleType
from typing import Any

import numpy as np

from differential.batch import Updates
from differential.trace.batch import Batch, Description, key_hash
from differential.trace.dense import DensePairs
from differential.trace.index import HashIndex, KeyLookups, LookupCache
from differential.trace.keyset import KeySet
from differential.trace.spine import Spine

_VALUES: tuple[type, ...] = (
    np.ndarray,
    np.generic,
    int,
    float,
    complex,
    str,
    bytes,
    bool,
    type(None),
    range,
    type,
    BuiltinFunctionType,
    ModuleType,
    Updates,
    Batch,
    Description,
    LookupCache,
    KeyLookups,
    HashIndex,
    DensePairs,
)
_LAYERS = ("differential.", "joins.")


class Savepoint:
    """The state reachable from `roots` (module docstring); `stops`: objects not to
    walk (and whatever only they reach)."""

    def __init__(self, roots: Iterable[object], stops: Iterable[object] = ()) -> None:
        # (how, object, what it held): how to put each recorded object back
        self._saved: list[tuple[str, Any, Any]] = []
        self._walk(list(roots), {id(s) for s in stops})

    def restore(self) -> None:
        """Put every recorded object back as it was when the savepoint was taken."""
        for how, obj, held in reversed(self._saved):
            if how == "dict":
                obj.clear()
                obj.update(held)
            elif how == "list":
                obj[:] = held
            elif how == "object":
                _restore_attributes(obj, held)
            elif how == "set" or how == "deque":
                obj.clear()
                obj.update(held) if how == "set" else obj.extend(held)
            else:  # "keyset"
                obj.rollback(held, key_hash(obj.added_since(held)))

    def __len__(self) -> int:
        """How many objects and containers it restores (for measuring)."""
        return len(self._saved)

    def _walk(self, stack: list[object], seen: set[int]) -> None:
        kinds = _KINDS
        saved = self._saved
        while stack:
            obj: Any = stack.pop()
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            cls = type(obj)
            kind = kinds.get(cls)
            if kind is None:
                kind = kinds[cls] = _kind(cls)
            if kind == "value":
                continue
            if kind == "object":
                held = _attributes(obj)
                saved.append(("object", obj, held))
                stack.extend(held.values())
            elif kind == "list":
                items = obj.copy()
                saved.append(("list", obj, items))
                stack.extend(items)
            elif kind == "tuple":
                stack.extend(obj)
            elif kind == "dict":
                copy = obj.copy()
                saved.append(("dict", obj, copy))
                stack.extend(copy.values())
                stack.extend(copy)
            elif kind in ("set", "deque"):
                members = obj.copy() if kind == "set" else list(obj)
                saved.append((kind, obj, members))
                stack.extend(members)
            elif kind == "method":  # a receiver: its operator, which may be reached only so
                stack.append(obj.__self__)
            elif kind == "function":  # a closure: what it captured (no cell is rebound)
                stack.extend(_cell(cell) for cell in obj.__closure__ or ())
            elif kind == "partial":
                stack.extend([obj.func, *obj.args, *obj.keywords.values()])
            elif kind == "keyset":
                saved.append(("keyset", obj, obj.mark()))
            elif kind == "spine":  # its deferred maintenance first (`Spine.settle`)
                obj.settle()
                held = _attributes(obj)
                saved.append(("object", obj, held))
                stack.extend(held.values())


_KINDS: dict[type, str] = {}  # how the walk treats each class (`_kind`), learnt as met


def _kind(cls: type) -> str:
    """How the walk treats instances of `cls`."""
    if issubclass(cls, _VALUES):
        return "value"
    if cls is MethodType:
        return "method"
    if cls is FunctionType:
        return "function"
    if cls is partial:
        return "partial"
    if cls is list:
        return "list"
    if cls is dict:
        return "dict"
    if cls is set:
        return "set"
    if cls is deque:
        return "deque"
    if cls in (tuple, frozenset):
        return "tuple"
    if issubclass(cls, KeySet):
        return "keyset"
    if issubclass(cls, Spine):
        return "spine"
    if cls.__module__.startswith(_LAYERS) and (hasattr(cls, "__dict__") or _slots(cls)):
        return "object"
    return "value"  # another layer's object, or a builtin: not this layer's state


def _cell(cell: Any) -> object:
    try:
        return cell.cell_contents
    except ValueError:  # empty
        return None


def _slots(cls: type) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        names += [slots] if isinstance(slots, str) else list(slots)
    return [n for n in names if n not in ("__dict__", "__weakref__")]


_MISSING = object()


def _attributes(obj: object) -> dict[str, Any]:
    cls = type(obj)
    slots = _SLOTS.get(cls)
    if slots is None:
        slots = _SLOTS[cls] = tuple(_slots(cls))
    attrs = obj.__dict__.copy() if hasattr(obj, "__dict__") else {}
    for name in slots:
        attrs[name] = getattr(obj, name, _MISSING)
    return attrs


_SLOTS: dict[type, tuple[str, ...]] = {}


def _restore_attributes(obj: object, attrs: dict[str, Any]) -> None:
    slots = _SLOTS[type(obj)]
    if hasattr(obj, "__dict__"):
        held = obj.__dict__
        held.clear()
        held.update(attrs if not slots else {k: v for k, v in attrs.items() if k not in slots})
    for name in slots:
        value = attrs[name]
        if value is not _MISSING:
            object.__setattr__(obj, name, value)
        elif hasattr(obj, name):
            delattr(obj, name)
