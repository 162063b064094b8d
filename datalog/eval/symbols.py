"""The symbol table: strings interned to stable int64 ids.

Layer: datalog. May import numpy and pyarrow (when strings are interned) only.
One `SymbolTable` per database; ids are
0, 1, 2, ... in first-seen order and never change for the life of the table
(`to_list`/`from_list` persist them). Columns of type `symbol` hold these ids.
Interning is vectorized: a batch is dictionary-encoded by Arrow and only the
distinct values are looked up one by one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import pyarrow as pa

IdArray = npt.NDArray[np.int64]
ObjectArray = npt.NDArray[np.object_]


class SymbolTable:
    """Interns strings to int64 ids; id `i` is the i-th distinct string seen."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        # Capacity-doubling array of the strings, so `strings(ids)` is one fancy index.
        self._table: ObjectArray = np.empty(16, dtype=object)

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, value: object) -> bool:
        return value in self._ids

    def intern(self, value: str) -> int:
        """The id of `value`, assigning the next id when it is new."""
        found = self._ids.get(value)
        if found is not None:
            return found
        if not isinstance(value, str):
            raise TypeError(f"symbols are strings, got {type(value).__name__}: {value!r}")
        new = len(self._ids)
        if new == len(self._table):
            grown: ObjectArray = np.empty(2 * new, dtype=object)
            grown[:new] = self._table
            self._table = grown
        text = str(value)  # np.str_ -> str
        self._ids[text] = new
        self._table[new] = text
        return new

    def get(self, value: str) -> int | None:
        """The id of `value` if it was interned, else None (interns nothing)."""
        return self._ids.get(value)

    def intern_many(
        self, values: Sequence[str] | npt.NDArray[np.generic] | pa.Array | pa.ChunkedArray
    ) -> IdArray:
        """Ids of `values`, interning new ones in order of first appearance.

        Arrow's `dictionary_encode` finds the distinct strings (in order of first
        appearance) and each value's index among them in one hashing pass; only
        the distinct strings are looked up in the table, one by one.
        """
        import pyarrow as pa  # here: `import datalog` does not load pyarrow

        from datalog.eval.arrow import to_numpy

        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if not isinstance(values, pa.Array):  # Python or numpy strings: to Arrow first
            values = pa.array(np.asarray(values, dtype=object).reshape(-1), pa.large_string())
        if len(values) == 0:
            return np.empty(0, dtype=np.int64)
        encoded = values.dictionary_encode()
        distinct = encoded.dictionary.to_pylist()
        ids = np.fromiter((self.intern(text) for text in distinct), np.int64, len(distinct))
        return ids[to_numpy(encoded.indices)]

    def string(self, symbol_id: int) -> str:
        """The string of one id."""
        if not 0 <= symbol_id < len(self._ids):
            raise KeyError(f"unknown symbol id {symbol_id}")
        return str(self._table[symbol_id])

    def strings(self, ids: npt.ArrayLike) -> ObjectArray:
        """The strings of many ids, as an object array of the same shape."""
        index = np.asarray(ids, dtype=np.int64)
        if index.size and (index.min() < 0 or index.max() >= len(self._ids)):
            raise KeyError("unknown symbol id in column")
        result: ObjectArray = self._table[index]
        return result

    def forget_from(self, size: int) -> None:
        """Forget the ids from `size` on (interned by a computation that is gone)."""
        for text in self._table[size : len(self._ids)]:
            del self._ids[str(text)]
        self._table[size:] = None

    def to_list(self) -> list[str]:
        """The strings in id order (the persisted form)."""
        return [str(s) for s in self._table[: len(self._ids)]]

    @classmethod
    def from_list(cls, strings: Iterable[str]) -> SymbolTable:
        """A table whose id `i` is `strings[i]`."""
        table = cls()
        table.load(strings)
        return table

    def load(self, strings: Iterable[str]) -> None:
        """Make this (empty) table's id `i` be `strings[i]` (a persisted table, restored
        in place: whatever holds this table keeps holding the right one)."""
        assert not self._ids, "load into an empty table"
        for expected, text in enumerate(strings):
            if self.intern(text) != expected:
                raise ValueError(f"duplicate symbol {text!r} in persisted symbol table")
