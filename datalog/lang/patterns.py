"""Regular expressions that may backtrack exponentially: found before they run.

Layer: datalog. Imports only the standard library.

`match(p, s)` runs a backtracking matcher (`regex`). A repeated group that can
match the same text in more than one way makes it try exponentially many ways on
a symbol that almost matches: `(a+)+b`, `(.*a){20}`, `(a|a)+b`, `(a|aa)+b` take
minutes on 30-odd characters. `pattern_hazard` finds two shapes:

- a nested quantifier: a group repeated (`*`, `+`, `{n,}`, `{n,m}` with m > 1)
  that holds a repeated item itself;
- overlapping alternatives: a repeated group two of whose alternatives start with
  the same sequence of atoms, one being a prefix of the other (`(a|aa)`, `(ab|ab)`).

Possessive quantifiers (`a++`, `a*+`) and atomic groups (`(?>...)`) never give back
what they matched, so a repeat inside or of them is no hazard: they are the way to
write such a pattern safely. The scan is a heuristic: a pattern it does not
understand (conditionals, say) is let through, and every match is bounded by the
running budget anyway (`datalog.lang.functions`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class _Item:
    """An atom or a group, with its quantifier."""

    start: int  # offset in the pattern
    text: str  # the atom as written ("" for a group)
    group: _Group | None = None
    repeats: bool = False  # its quantifier allows more than one repetition
    varies: bool = False  # ... and more than one count of them (not `{n}`)
    possessive: bool = False
    end: int = 0  # past its quantifier


@dataclass
class _Group:
    start: int
    atomic: bool = False
    branches: list[list[_Item]] = field(default_factory=list)


class _Unscanned(Exception):
    """The pattern uses syntax the scanner does not follow."""


Hazard = tuple[int, str]


def pattern_hazard(pattern: str) -> Hazard | None:
    """`(offset, reason)` of the first construct of `pattern` that may backtrack
    exponentially, or None (none found, or syntax beyond the scanner)."""
    try:
        scanner = _Scanner(pattern)
        branches = scanner.branches()
        if scanner.at < len(pattern):  # an unbalanced `)`: the pattern is invalid
            return None
    except _Unscanned:
        return None
    return _first_hazard(branches, pattern)


def _first_hazard(branches: list[list[_Item]], pattern: str) -> Hazard | None:
    for branch in branches:
        for item in branch:
            if item.group is None:
                continue
            if item.repeats and not item.possessive and not item.group.atomic:
                found = _repeated_group_hazard(item, pattern)
                if found is not None:
                    return found
            inner = _first_hazard(item.group.branches, pattern)
            if inner is not None:
                return inner
    return None


def _repeated_group_hazard(item: _Item, pattern: str) -> Hazard | None:
    assert item.group is not None
    shown = pattern[item.start : item.end]
    inner = _repeated_inside(item.group)
    if inner is not None:
        return item.start, (
            f"nested quantifier: the group `{shown}` is repeated and repeats "
            f"`{pattern[inner.start : inner.end]}` inside, which can backtrack "
            "exponentially; make the inner repeat possessive (`++`, `*+`) or the "
            "group atomic (`(?>...)`)"
        )
    pair = _overlapping(item.group.branches)
    if pair is not None:
        return item.start, (
            f"the repeated group `{shown}` has alternatives that match the same text "
            f"(`{pair[0]}` and `{pair[1]}`), which can backtrack exponentially; "
            "make them exclusive or the group atomic (`(?>...)`)"
        )
    return None


def _repeated_inside(group: _Group) -> _Item | None:
    """An item repeated somewhere inside `group` that may give back what it matched."""
    if group.atomic:
        return None
    for branch in group.branches:
        for item in branch:
            if item.varies and not item.possessive:
                return item
            if item.group is not None:
                found = _repeated_inside(item.group)
                if found is not None:
                    return found
    return None


def _overlapping(branches: list[list[_Item]]) -> tuple[str, str] | None:
    """Two alternatives whose leading atoms (up to the first group or quantifier)
    are equal, or one a prefix of the other, as written (alternatives that start
    with a group or a quantifier are not compared: the scan does not see into them)."""
    prefixes = [p for p in map(_leading_atoms, branches) if p]
    for i, first in enumerate(prefixes):
        for second in prefixes[i + 1 :]:
            n = min(len(first), len(second))
            if first[:n] == second[:n]:
                return "".join(first), "".join(second)
    return None


def _leading_atoms(branch: list[_Item]) -> tuple[str, ...]:
    atoms: list[str] = []
    for item in branch:
        if item.group is not None or item.repeats:
            break
        atoms.append(item.text)
    return tuple(atoms)


class _Scanner:
    """A recursive descent over the pattern's syntax, just deep enough to see its
    groups, alternatives and quantifiers."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.at = 0

    def branches(self) -> list[list[_Item]]:
        """Alternatives up to the end or an unmatched `)` (left unread)."""
        out: list[list[_Item]] = [[]]
        while self.at < len(self.pattern) and self.pattern[self.at] != ")":
            if self.pattern[self.at] == "|":
                self.at += 1
                out.append([])
                continue
            item = self._atom()
            if item is not None:
                self._quantifier(item)
                item.end = self.at
                out[-1].append(item)
        return out

    def _atom(self) -> _Item | None:
        start, char = self.at, self.pattern[self.at]
        if char == "(":
            return self._group()
        if char == "[":
            self._class()
        elif char == "\\":
            self._escape()
        else:
            self.at += 1
        return _Item(start, self.pattern[start : self.at])

    def _escape(self) -> None:
        self.at += 2
        kind = self.pattern[self.at - 1 : self.at]
        if kind in ("p", "P", "N") and self.pattern[self.at : self.at + 1] == "{":
            self._skip_past("}")
        elif kind == "x":
            self.at += 2
        elif kind in ("u", "U", "g", "k"):
            raise _Unscanned  # rare: leave them to the time budget

    def _class(self) -> None:
        self.at += 1
        if self.pattern[self.at : self.at + 1] == "^":
            self.at += 1
        if self.pattern[self.at : self.at + 1] == "]":
            self.at += 1
        while self.at < len(self.pattern) and self.pattern[self.at] != "]":
            if self.pattern[self.at] == "[":
                raise _Unscanned  # nested sets (regex's V1 syntax)
            self.at += 2 if self.pattern[self.at] == "\\" else 1
        if self.at >= len(self.pattern):
            raise _Unscanned
        self.at += 1

    def _group(self) -> _Item | None:
        start = self.at
        self.at += 1
        group = _Group(start)
        if self.pattern[self.at : self.at + 1] == "?" and not self._group_kind(group):
            return None  # an inline flag or a comment: no group
        group.branches = self.branches()
        if self.pattern[self.at : self.at + 1] != ")":
            raise _Unscanned  # unbalanced: the pattern is invalid anyway
        self.at += 1
        return _Item(start, "", group)

    def _group_kind(self, group: _Group) -> bool:
        """Read what follows `(?`; False for what is no group (flags, a comment)."""
        rest = self.pattern[self.at + 1 :]
        if rest.startswith("#"):
            self._skip_past(")")
            return False
        if rest[:1] in (":", ">", "=", "!", "|"):
            group.atomic = rest[0] == ">"
            self.at += 2
            return True
        if rest.startswith(("<=", "<!")):
            self.at += 3
            return True
        if rest.startswith(("P<", "<", "'")):
            self._skip_past(">" if not rest.startswith("'") else "'", after=2)
            return True
        flags = len(rest) - len(rest.lstrip("aiLmsuxV01-"))
        if flags and rest[flags : flags + 1] in (")", ":"):
            self.at += 1 + flags + 1
            return rest[flags] == ":"
        raise _Unscanned  # conditionals, backreferences by name, recursion

    def _skip_past(self, end: str, after: int = 0) -> None:
        found = self.pattern.find(end, self.at + after)
        if found < 0:
            raise _Unscanned
        self.at = found + 1

    def _quantifier(self, item: _Item) -> None:
        char = self.pattern[self.at : self.at + 1]
        if char in ("*", "+"):
            self.at += 1
            item.repeats = item.varies = True
        elif char == "?":
            self.at += 1
        elif char == "{":
            bounds = self._braces()
            if bounds is None:
                return
            low, high = bounds
            item.repeats = high is None or high > 1
            item.varies = item.repeats and high != low
        else:
            return
        suffix = self.pattern[self.at : self.at + 1]
        if suffix in ("?", "+"):
            self.at += 1
            item.possessive = suffix == "+"

    def _braces(self) -> tuple[int, int | None] | None:
        """Read `{n}`, `{n,}`, `{,m}` or `{n,m}`: the least and most repetitions
        (None: no most); None when it is no quantifier but a literal `{`."""
        end = self.pattern.find("}", self.at)
        low, comma, high = (self.pattern[self.at + 1 : end] if end > 0 else "").partition(",")
        if end < 0 or not (low.isdigit() or (comma and high.isdigit() and not low)):
            return None
        if high and not high.isdigit():
            return None
        self.at = end + 1
        least = int(low) if low else 0
        if not comma:
            return least, least
        return least, int(high) if high else None
