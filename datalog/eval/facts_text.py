"""Small fact files read without pyarrow: Python's own text handling, whole columns.

Layer: datalog (eval). Imports numpy, the schema types and the `Tuning` in force. The
fact-file source (`datalog.io.sources.csv`) asks it first.

pyarrow's CSV reader (`datalog.io.sources.csv`) is the reference: fast on large files, but
importing it costs about 30 MiB and 50 ms, more than a program of small fact files
needs in all (the CRDT workload's whole peak was that plus 10 MiB; ADR 0067). A file
of at most `Tuning.text_facts` bytes is read here instead (a larger one of integer
columns by numpy, `facts_integers`), but only where the answer
is certain to be the reference's: every line a plain form of its columns' types
(`FORMS`), `\\n` or `\\r\\n` line ends, UTF-8 without a byte-order mark, each integer
in range. Anything else (`None`) goes to the reference, which reads it or names the
bad line: this reader never raises on a file's content.

Columns come out as numpy arrays by the declaration's names: `number` int64,
`unsigned` uint64, `float` float64, `symbol` an object array of Python strings
(interned at insert, `datalog.eval.rows`).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from datalog.eval.facts_integers import read_integers
from datalog.lang.schema import RelationInfo
from differential.tuning import TUNING

Columns = dict[str, npt.NDArray[np.generic]]

# The forms both readers give the same value (`int`/`float` of the text): an integer's
# digits with an optional sign (unsigned: only `+`), a decimal float with an optional
# sign, fraction and exponent (no `nan`, `inf`, `_`, spaces). A symbol is any text
# without the delimiter or a line end.
FORMS = {
    "number": r"[+-]?[0-9]+",
    "unsigned": r"\+?[0-9]+",
    "float": r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?",
}
DTYPES = {"number": np.int64, "unsigned": np.uint64, "float": np.float64}


def read_plain(info: RelationInfo, path: Path, delimiter: str, headers: bool) -> Columns | None:
    """The facts of `path` as typed columns, or None where the reference must decide:
    a line not of a plain form (see the module), or a file of more than
    `Tuning.text_facts` bytes unless its columns are all integers (then up to
    `Tuning.integer_facts` bytes, `facts_integers`, which reads them first at any size
    under `Tuning.integers_by_numpy`). `delimiter` is one character; `info` has at
    least one column."""
    size = path.stat().st_size
    small = bool(TUNING.text_facts) and size <= TUNING.text_facts  # (0: never)
    if not small or TUNING.integers_by_numpy:
        found = _read_integers(info, path, delimiter, headers, size)
        if found is not None or not small:
            return found
    return _read_small(info, path, delimiter, headers)


def _read_integers(
    info: RelationInfo, path: Path, delimiter: str, headers: bool, size: int
) -> Columns | None:
    """The columns of a file of integer columns only, by numpy; None otherwise."""
    integers = all(kind in ("number", "unsigned") for kind in info.types)
    if not integers or headers or not TUNING.integer_facts or size > TUNING.integer_facts:
        return None
    unsigned = [kind == "unsigned" for kind in info.types]
    found = read_integers(path, delimiter, unsigned)
    return None if found is None else dict(zip(info.column_names, found, strict=True))


def _read_small(info: RelationInfo, path: Path, delimiter: str, headers: bool) -> Columns | None:
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None  # the reference reads bad bytes as replacement characters
    if text.startswith("\ufeff"):
        return None
    text = text.replace("\r\n", "\n")
    if "\r" in text:  # a lone `\r`: where it ends a line is the reference's to say
        return None
    lines = text.split("\n")
    if headers:
        if not lines[0]:
            return None
        lines = lines[1:]
    body = "\n".join(line for line in lines if line)
    if not body:
        return _columns(info, [[] for _ in info.types])
    if not _lines(tuple(info.types), delimiter).fullmatch(body):
        return None
    fields = body.replace("\n", delimiter).split(delimiter)
    return _columns(info, [fields[i :: info.arity] for i in range(info.arity)])


@cache
def _lines(types: tuple[str, ...], delimiter: str) -> re.Pattern[str]:
    """Lines of `types`' forms split by `delimiter`, one after another."""
    free = re.escape(delimiter) + "\n"
    fields = [FORMS.get(kind, f"[^{free}]*") for kind in types]
    line = re.escape(delimiter).join(f"(?:{field})" for field in fields)
    return re.compile(f"{line}(?:\n{line})*")


def _columns(info: RelationInfo, texts: list[list[str]]) -> Columns | None:
    """Each column's texts as its type's array; None if an integer is out of range."""
    columns: Columns = {}
    for name, kind, values in zip(info.column_names, info.types, texts, strict=True):
        if kind == "symbol":
            column = np.empty(len(values), dtype=object)
            column[:] = values
            columns[name] = column
            continue
        convert = float if kind == "float" else int
        try:
            columns[name] = np.fromiter(map(convert, values), DTYPES[kind], len(values))
        except (OverflowError, ValueError):  # (ValueError: more digits than `int` reads)
            return None  # the reference names the value out of range
    return columns
