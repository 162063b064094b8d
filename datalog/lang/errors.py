"""One error hierarchy for bad input, with one formatter.

Layer: datalog. Every error a user can cause is a `DatalogError`: it carries a
message, a position (line, column, span) and the source text, and renders as

    error: unknown relation `edg`; did you mean `edge`?
      at line 3, column 14
        reach(x, y) :- edg(x, y).
                       ^^^

Several semantic errors found in one program are raised together as one
`DatalogErrors` whose `errors` lists each.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from datalog.lang.ast import NOWHERE, Span
from differential.budget import Interrupted, TooManyRows


class DatalogError(Exception):
    """Base of every error caused by the user's input."""

    category = "incorrect"

    def __init__(self, message: str, span: Span = NOWHERE, source: str = "") -> None:
        self.message = message
        self.span = span
        self.source = span.source or source  # a span from another text names it
        super().__init__(self.format())

    @property
    def line(self) -> int:
        return self.span.line

    @property
    def column(self) -> int:
        return self.span.column

    def with_source(self, source: str) -> DatalogError:
        """The same error, rendered against `source` (used when a pass lacks it)."""
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.source = source
        Exception.__init__(clone, clone.format())
        return clone

    def format(self) -> str:
        text = f"error: {printable(self.message)}"
        if self.span.line <= 0:
            return text
        text += f"\n  at line {self.span.line}, column {self.span.column}"
        lines = self.source.splitlines()
        if 0 < self.span.line <= len(lines):
            width = 1
            if self.span.end_line == self.span.line and self.span.end_column > self.span.column:
                width = self.span.end_column - self.span.column
            src, column, width = _window(lines[self.span.line - 1], self.span.column, width)
            text += f"\n    {src}\n    {' ' * (column - 1)}{'^' * width}"
        return text

    def to_dict(self) -> dict[str, object]:
        """A JSON-able form (used by the server)."""
        return {
            "category": self.category,
            "message": self.message,
            "line": self.span.line,
            "column": self.span.column,
        }


class DatalogSyntaxError(DatalogError):
    """The text does not parse."""


class DatalogSemanticError(DatalogError):
    """The text parses but means nothing valid (arity, types, binding, strata)."""


class UnknownNameError(DatalogSemanticError):
    """A relation, type or function that is not declared."""

    category = "not_found"


class ArityError(DatalogSemanticError):
    pass


class TypeMismatchError(DatalogSemanticError):
    pass


class RangeRestrictionError(DatalogSemanticError):
    """A variable of a head, negation or comparison is not bound positively."""


class StratificationError(DatalogSemanticError):
    """Negation or aggregation through recursion."""


class DuplicateDeclarationError(DatalogSemanticError):
    category = "conflict"


class ComponentError(DatalogSemanticError):
    """A component that cannot be expanded: inheritance in a cycle, an instantiation
    without end, an invalid or misplaced `.override`, a statement a component
    cannot hold."""


class RedefinitionError(DatalogSemanticError):
    """`redefine(relation, text)` was given something other than rules for `relation`."""


class TransactionError(DatalogError):
    """A transaction names an unknown relation or carries badly shaped rows."""


class BudgetExceeded(DatalogError, Interrupted):
    """A request ran past its time budget, or its database was interrupted
    (`Database.interrupt`: shutting down): it was stopped at a check point and
    changed nothing. Every way a computation is stopped raises one of these."""


class RowLimitExceeded(BudgetExceeded, TooManyRows):
    """A step of a request would have built more rows than its budget's row limit
    (`Database.budget(rows=...)`, `deltalog serve --max-rows`): refused before
    building them; nothing changed."""


class UnsupportedError(DatalogError):
    category = "unsupported"


class UnboundFunctorError(UnknownNameError):
    """A query needs a declared `.functor` that no Python function is bound to."""


class FunctorError(DatalogError):
    """A user-defined functor raised, or returned a value that does not fit its
    declared result type, or a `range` had too many values. The request that ran
    it changed nothing."""


class FactNotFoundError(DatalogError):
    """`why` was asked about a tuple that is not in its relation now."""

    category = "not_found"


class FactHoldsError(DatalogError):
    """`why_not` was asked about a tuple that is in its relation (`why` explains it)."""

    category = "conflict"


class EpochError(DatalogError):
    """`as_of` names no readable epoch: not an integer, negative, or after the current
    epoch. `oldest` and `current` are the readable range's ends."""

    def __init__(self, message: str, oldest: int, current: int) -> None:
        self.oldest, self.current = oldest, current
        super().__init__(message)

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "oldest_epoch": self.oldest, "current_epoch": self.current}


class HistoryCompactedError(EpochError):
    """`as_of` names an epoch older than the history the database keeps: its state
    has been compacted away; `oldest` is the oldest epoch still readable."""

    category = "not_found"


class DatalogErrors(DatalogError):
    """All the errors found in one program, reported together."""

    def __init__(self, errors: Sequence[DatalogError]) -> None:
        self.errors = list(errors)
        first = self.errors[0]
        super().__init__(first.message, first.span, first.source)
        self.category = first.category

    def format(self) -> str:
        if len(self.errors) == 1:
            return self.errors[0].format()
        parts = [f"{len(self.errors)} errors:"] + [e.format() for e in self.errors]
        return "\n".join(parts)


_SHOWN = 100  # characters of a long source line shown around the error


def _window(line: str, column: int, width: int) -> tuple[str, int, int]:
    """At most about `_SHOWN` characters of `line` around `column` (`...` where cut),
    with the column and caret width within them, and what cannot be printed (a lone
    surrogate) escaped, so that the message itself can always be printed."""
    start = 0 if len(line) <= _SHOWN else max(0, min(column - 1 - _SHOWN // 2, len(line) - _SHOWN))
    end = min(len(line), start + _SHOWN)
    width = max(1, min(width, end - (column - 1)))
    shown = ("..." if start else "") + line[start:end] + ("..." if end < len(line) else "")
    return printable(shown), column - start + (3 if start else 0), width


_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """`text` with each lone surrogate (which no output can encode) shown as U+FFFD."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def raise_all(errors: Iterable[DatalogError]) -> None:
    """Raise the collected errors, if any: one alone, several as `DatalogErrors`."""
    found = list(errors)
    if len(found) == 1:
        raise found[0]
    if found:
        raise DatalogErrors(found)


def ordered_errors(errors: Iterable[DatalogError], source: str) -> list[DatalogError]:
    """Errors without duplicates (normalized copies of one rule), by position."""
    unique: dict[tuple[str, str, int, int, int], DatalogError] = {}
    for error in errors:
        span = error.span
        key = (type(error).__name__, error.message, span.line, span.column, span.start)
        if key not in unique:
            unique[key] = error if error.source or not source else error.with_source(source)
    return sorted(unique.values(), key=lambda e: (e.span.line, e.span.column))


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """`"; did you mean `edge`?"` when a close candidate exists, else `""`."""
    import difflib  # (only when a name is unknown)

    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean `{close[0]}`?" if close else ""
