"""Whole-text scans of Datalog source, done before (and instead of) parsing it.

Layer: datalog (language). Imports numpy, `datalog.lang.ast` and `datalog.lang.nesting`.

Hostile text must be refused in time linear in its size and small in constant:
a lone surrogate (text that cannot be written as UTF-8, so could never be logged
or served) and bracket nesting deeper than `MAX_NESTING` (`datalog.lang.nesting`) are
found here with numpy, before lark sees the text. The same scan tells a syntax error where code
lies: outside strings and comments, how deep the brackets are at an offset, and
where the last piece of code before an offset ends, without a Python loop over
every character.
"""

from __future__ import annotations

import bisect
import re
from functools import cached_property

import numpy as np
import numpy.typing as npt

from datalog.lang.ast import Span
from datalog.lang.nesting import MAX_NESTING

# Strings and comments, found left to right: whatever starts first wins, so a
# `//` inside a string or a `"` inside a comment is not one. An unterminated
# string or comment runs to the end of its line or of the text.
_NOT_CODE = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*|/\*.*?(?:\*/|$)', re.DOTALL)


def span_at(text: str, offset: int, width: int = 1) -> Span:
    """The span of `width` characters of `text` from `offset`."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return Span(line, column, line, column + width, offset, offset + width, text)


def first_surrogate(text: str) -> int | None:
    """The offset of the first lone surrogate (U+D800 to U+DFFF) in `text`, or None."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start
    return None


class SourceText:
    """One text's code regions and bracket depths, computed once and on demand."""

    def __init__(self, text: str) -> None:
        self.text = text

    @cached_property
    def skipped(self) -> list[tuple[int, int]]:
        """The (start, end) offsets of every string and comment, in order."""
        if '"' not in self.text and "/" not in self.text:
            return []
        return [m.span() for m in _NOT_CODE.finditer(self.text)]

    @cached_property
    def _starts(self) -> list[int]:
        return [start for start, _ in self.skipped]

    @cached_property
    def depths(self) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
        """Parenthesis and brace depth after each character (strings and comments
        count for nothing)."""
        codes = np.frombuffer(self.text.encode("utf-32-le", "surrogatepass"), np.uint32)
        code = self._code_mask(len(codes))
        parens = np.zeros(len(codes), np.int32)
        braces = np.zeros(len(codes), np.int32)
        parens[code & (codes == ord("("))] = 1
        parens[code & (codes == ord(")"))] = -1
        braces[code & (codes == ord("{"))] = 1
        braces[code & (codes == ord("}"))] = -1
        return np.cumsum(parens, dtype=np.int32), np.cumsum(braces, dtype=np.int32)

    def _code_mask(self, size: int) -> npt.NDArray[np.bool_]:
        """True on characters outside strings and comments."""
        marks = np.zeros(size + 1, np.int32)
        if self.skipped:
            spans = np.array(self.skipped, dtype=np.int64)
            np.add.at(marks, spans[:, 0], 1)
            np.add.at(marks, spans[:, 1], -1)
        inside: npt.NDArray[np.bool_] = np.cumsum(marks[:size]) > 0
        return ~inside

    def too_deep(self, limit: int = MAX_NESTING) -> int | None:
        """The offset of the first bracket that opens level `limit + 1`, or None."""
        text = self.text
        if text.count("(") + text.count("{") <= limit:
            return None  # cannot be that deep: no scan
        parens, braces = self.depths
        deep = np.flatnonzero((parens + braces) > limit)
        return int(deep[0]) if len(deep) else None

    def depths_at(self, end: int) -> tuple[int, int]:
        """How many `(` and `{` are open before offset `end`."""
        if end <= 0:
            return 0, 0
        parens, braces = self.depths
        return int(parens[end - 1]), int(braces[end - 1])

    def code_end_before(self, pos: int) -> int:
        """Where the last piece of code (a token, a string) before `pos` ends; 0 if none."""
        end = pos
        while True:
            end = self._blank_before(end)
            if end == 0:
                return 0
            index = bisect.bisect_right(self._starts, end - 1) - 1
            if index < 0 or self.skipped[index][1] < end:
                return end  # code, not inside a string or comment
            start, _ = self.skipped[index]
            if self.text[start] == '"':
                return end  # a string is a piece of code
            end = start  # inside a comment: look before it

    def _blank_before(self, end: int) -> int:
        """`end` moved back over blanks (a window at a time: never a copy of the text)."""
        while end > 0:
            chunk = self.text[max(0, end - 256) : end]
            kept = len(chunk.rstrip())
            if kept:
                return end - len(chunk) + kept
            end -= len(chunk)
        return 0

    def on_later_line(self, pos: int) -> bool:
        """Whether `pos` is on a later line than the last piece of code before it."""
        return "\n" in self.text[self.code_end_before(pos) : pos]

    def after_previous(self, pos: int) -> Span:
        """A one-character span just after the last piece of code before `pos`."""
        return span_at(self.text, self.code_end_before(pos), 1)
