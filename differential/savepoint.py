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
from collections.abc import Callable, Iterable
from functools import partial
from types import BuiltinFunctionType, FunctionType, MethodType, ModuleType
from typing import Any

import numpy as np

from differential.batch import Updates
from differential.trace.batch import Batch, Description, key_hash
from differential.trace.dense import DensePairs
from differential.trace.index import HashIndex, KeyLookups, KeySet, KeySetMark, LookupCache
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

Restore = Callable[[], None]


class Savepoint:
    """The state reachable from `roots` (module docstring); `stops`: objects not to
    walk (and whatever only they reach)."""

    def __init__(self, roots: Iterable[object], stops: Iterable[object] = ()) -> None:
        self._undo: list[Restore] = []
        self._walk(list(roots), {id(s) for s in stops})

    def restore(self) -> None:
        """Put every recorded object back as it was when the savepoint was taken."""
        for undo in reversed(self._undo):
            undo()

    def __len__(self) -> int:
        """How many objects and containers it restores (for measuring)."""
        return len(self._undo)

    def _walk(self, stack: list[object], seen: set[int]) -> None:
        kinds: dict[type, str] = {}
        undo = self._undo
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
            if kind == "list":
                items = list(obj)
                undo.append(partial(_restore_list, obj, items))
                stack.extend(items)
            elif kind == "dict":
                saved = dict(obj)
                undo.append(partial(_restore_dict, obj, saved))
                stack.extend(saved.values())
                stack.extend(saved.keys())
            elif kind == "set":
                members = set(obj)
                undo.append(partial(_restore_set, obj, members))
                stack.extend(members)
            elif kind == "deque":
                queued = list(obj)
                undo.append(partial(_restore_deque, obj, queued))
                stack.extend(queued)
            elif kind == "tuple":
                stack.extend(obj)
            elif kind == "method":  # a receiver: its operator, which may be reached only so
                stack.append(obj.__self__)
            elif kind == "function":  # a closure: what it captured (no cell is rebound)
                for cell in obj.__closure__ or ():
                    stack.append(_cell(cell))
            elif kind == "partial":
                assert isinstance(obj, partial)
                stack.extend([obj.func, *obj.args, *obj.keywords.values()])
            elif kind == "keyset":
                assert isinstance(obj, KeySet)
                undo.append(partial(_rollback_keys, obj, obj.mark()))
            elif kind == "spine":
                assert isinstance(obj, Spine)
                obj.settle()
                attrs = _attributes(obj)
                undo.append(partial(_restore_attributes, obj, attrs))
                stack.extend(attrs.values())
            elif kind == "object":
                attrs = _attributes(obj)
                undo.append(partial(_restore_attributes, obj, attrs))
                stack.extend(attrs.values())


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
    attrs = dict(obj.__dict__) if hasattr(obj, "__dict__") else {}
    for name in _slots(type(obj)):
        attrs[name] = getattr(obj, name, _MISSING)
    return attrs


def _restore_attributes(obj: object, attrs: dict[str, Any]) -> None:
    if hasattr(obj, "__dict__"):
        held = obj.__dict__
        for name in [n for n in held if n not in attrs]:
            del held[name]
    for name, value in attrs.items():
        if value is _MISSING:
            if hasattr(obj, name):
                delattr(obj, name)
        else:
            object.__setattr__(obj, name, value)


def _rollback_keys(keys: KeySet, mark: KeySetMark) -> None:
    keys.rollback(mark, key_hash(keys.added_since(mark)))


def _restore_list(obj: list[Any], items: list[Any]) -> None:
    obj[:] = items


def _restore_dict(obj: dict[Any, Any], saved: dict[Any, Any]) -> None:
    obj.clear()
    obj.update(saved)


def _restore_set(obj: set[Any], members: set[Any]) -> None:
    obj.clear()
    obj.update(members)


def _restore_deque(obj: deque[Any], queued: list[Any]) -> None:
    obj.clear()
    obj.extend(queued)
