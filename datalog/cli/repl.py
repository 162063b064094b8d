"""The interactive session behind `deltalog repl`: one line in, its output out.

Layer: datalog (front end). Uses the public API (`Database`) and the display
helpers of `datalog.cli.display`.

A line that starts with `.` (a declaration or directive) is defined at once,
unless it opens a brace: a component (`.comp Name { ... }`) is collected until
its braces close. Other Datalog text is collected until a line ends with `.`
and then defined (facts commit as one transaction). Commands start with `:`; `?- q` is short
for `:query q`. Errors are printed to stderr and the session continues.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

from datalog import Change, Database, Subscription
from datalog.cli.display import answer_columns, change_lines, format_answer, stats_summary
from datalog.lang.errors import DatalogError

HELP = """\
Datalog text            .decl edge(x: number, y: number)   reach(x, y) :- edge(x, y).
                        edge(1, 2).   (a statement may span lines; it ends with `.`)
                        .comp Graph { ... }   .init g = Graph   (a component ends with `}`)
?- QUERY                print the current answer, e.g. ?- reach(1, y)
:query QUERY            the same
:insert REL (1, 2) ...  insert rows in one transaction (strings in double quotes)
:retract REL (1, 2) ... retract rows in one transaction
:redefine REL RULES     replace every rule of REL by RULES (on one line; none: no rules)
                        at one new epoch, e.g. :redefine reach reach(x, y) :- edge(x, y).
:what-if insert|retract REL (1, 2) ...
                        what each watched query would receive, committing nothing
:watch QUERY            subscribe: print every change of the answer with its epoch
:unwatch [N]            stop watch N (default: every watch)
:explain QUERY          show the strata, plans and shared arrangements of a query
:passes QUERY           show the query's plan after each planning pass
:why FACT               why a fact holds: a proof tree of minimal height, e.g. :why reach(1, 3)
:why-not FACT           why a fact does not hold: each rule's first failing premise
:asof E QUERY           the answer as of the end of epoch E, e.g. :asof 3 reach(1, y)
:asof E :why FACT       why a fact held at the end of epoch E (:why-not FACT too)
:stats                  relations, dataflows and live queries
:help                   this text
:quit                   leave (also end of input)"""

_TOKEN = re.compile(
    r'\s*(?:(?P<open>\()|(?P<close>\))|(?P<comma>,)|(?P<string>"(?:[^"\\]|\\.)*")'
    r"|(?P<number>[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?))"
)
_NOT_CODE = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?(?:\*/|$)', re.DOTALL)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}


class Session:
    """A database, the statement being typed and the active watches."""

    def __init__(self, db: Database | None = None) -> None:
        self.db = db or Database()
        self.pending: list[str] = []
        self.watches: dict[int, Subscription] = {}
        self.next_watch = 1
        self.commands: dict[str, Callable[[str], None]] = {
            "query": self.query,
            "insert": lambda rest: self.change(rest, inserting=True),
            "retract": lambda rest: self.change(rest, inserting=False),
            "redefine": self.redefine,
            "watch": self.watch,
            "unwatch": self.unwatch,
            "explain": self.explain,
            "passes": lambda rest: print(self.db.explain(_query_text(rest), passes=True)),
            "why": self.why,
            "why-not": self.why_not,
            "what-if": self.what_if,
            "asof": self.as_of,
            "stats": self.stats,
            "help": lambda _rest: print(HELP),
        }

    def prompt(self) -> str:
        return "   ...> " if self.pending else "deltalog> "

    def handle(self, raw: str) -> bool:
        """Act on one input line; `False` when the session should end."""
        line = raw.strip()
        if not self.pending and (not line or line.startswith("//")):
            return True
        if not self.pending and line in (":quit", ":q", ":exit"):
            return False
        try:
            self._dispatch(line)
        except DatalogError as error:
            print(error.format(), file=sys.stderr)
        return True

    def _dispatch(self, line: str) -> None:
        if self.pending or not (line.startswith((":", "?-"))):
            self._statement(line)
        elif line.startswith("?-"):
            self.query(line[2:])
        else:
            name, _, rest = line[1:].partition(" ")
            command = self.commands.get(name)
            if command is None:
                raise DatalogError(f"unknown command `:{name}`; type :help for the list")
            command(rest.strip())

    def _statement(self, line: str) -> None:
        self.pending.append(line)
        text = "\n".join(self.pending)
        if _open_braces(text) > 0:  # inside a `.comp { ... }` (or an aggregate's body)
            return
        if self.pending[0].startswith(".") or text.rstrip().endswith("."):
            self.pending = []
            self.db.define(text)

    # -- commands ---------------------------------------------------------------------

    def query(self, text: str, as_of: int | None = None) -> None:
        text = _query_text(text)
        rows = self.db.query(text, as_of=as_of)
        for line in format_answer(answer_columns(self.db, text), rows):
            print(line)

    def change(self, rest: str, *, inserting: bool) -> None:
        """Insert or retract rows, and say what changed: under set semantics, a row
        already present is not inserted again, and an absent one is not retracted."""
        relation, _, values = rest.partition(" ")
        if not relation:
            raise DatalogError("usage: :insert REL (1, 2) (3, 4)")
        rows = parse_rows(values)
        before = self._rows_of(relation)
        with self.db.transaction() as tx:
            (tx.insert if inserting else tx.retract)(relation, rows)
        after = self._rows_of(relation)
        print(_changed(inserting, rows, before, after, self.db.epoch))

    def what_if(self, rest: str) -> None:
        """`:what-if insert REL (1, 2) ...`: each live query's change, not committed."""
        verb, _, rest = rest.partition(" ")
        relation, _, values = rest.strip().partition(" ")
        if verb not in ("insert", "retract") or not relation:
            raise DatalogError("usage: :what-if insert REL (1, 2) ... (or retract)")
        rows = {relation: parse_rows(values)}
        found = self.db.what_if(*((rows, None) if verb == "insert" else (None, rows)))
        if not found:
            print("no live query: :watch one first")
        for query, change in found.items():
            print(f"{query} at epoch {change.epoch}: {_rows(len(change.rows))} would change")
            for line in change_lines(change):
                print(f"  {line}")

    def _rows_of(self, relation: str) -> set[tuple[Any, ...]] | None:
        """The rows of a set (or last-write-wins) relation now; None for a multiset
        relation (whose changes are its rows, with their counts) or an unknown one."""
        info = self.db.checked.schema.get(relation)
        if info is None or info.semantics == "multiset":
            return None
        variables = ", ".join(f"x{i}" for i in range(info.arity))
        return set(self.db.query(f"{relation}({variables})"))

    def redefine(self, rest: str) -> None:
        relation, _, rules = rest.partition(" ")
        if not relation:
            raise DatalogError(
                "usage: :redefine REL RULES, e.g. :redefine reach reach(x, y) :- e(x, y)."
            )
        epoch = self.db.redefine(relation, rules.strip())
        print(f"redefined `{relation}` at epoch {epoch}")

    def watch(self, text: str) -> None:
        text = _query_text(text)
        number = self.next_watch
        sub = self.db.subscribe(text, lambda change: _print_change(number, text, change))
        self.watches[number] = sub
        self.next_watch += 1

    def unwatch(self, rest: str) -> None:
        numbers = list(self.watches) if not rest else [_watch_number(rest, self.watches)]
        for number in numbers:
            self.db.unsubscribe(self.watches.pop(number))
            print(f"stopped watch {number}")

    def explain(self, text: str) -> None:
        print(self.db.explain(_query_text(text)))

    def why(self, text: str, as_of: int | None = None) -> None:
        if not text.strip():
            raise DatalogError("a fact is missing, e.g. `:why reach(1, 3)`")
        print(self.db.why(text.strip(), as_of=as_of))

    def why_not(self, text: str, as_of: int | None = None) -> None:
        if not text.strip():
            raise DatalogError("a fact is missing, e.g. `:why-not reach(1, 9)`")
        print(self.db.why_not(text.strip(), as_of=as_of))

    def as_of(self, rest: str) -> None:
        """`:asof E QUERY` (or `?- QUERY`), `:asof E :why FACT`: as of epoch E."""
        epoch, _, line = rest.partition(" ")
        line = line.strip()
        if not re.fullmatch(r"[+-]?\d+", epoch) or not line:
            raise DatalogError("usage: `:asof EPOCH QUERY` or `:asof EPOCH :why FACT`")
        if line.startswith(":why-not"):
            self.why_not(line.removeprefix(":why-not"), as_of=int(epoch))
        elif line.startswith(":why"):
            self.why(line.removeprefix(":why"), as_of=int(epoch))
        elif line.startswith(":"):
            raise DatalogError("`:asof` takes a query or `:why FACT`")
        else:
            self.query(line.removeprefix("?-"), as_of=int(epoch))

    def stats(self, _rest: str) -> None:
        for line in stats_summary(self.db.stats()):
            print(line)


def _changed(
    inserting: bool,
    rows: list[tuple[Any, ...]],
    before: set[tuple[Any, ...]] | None,
    after: set[tuple[Any, ...]] | None,
    epoch: int,
) -> str:
    """`inserted 1 row (1 already present) at epoch 5`, `retracted 0 rows (1 absent)...`"""
    verb = "inserted" if inserting else "retracted"
    if before is None or after is None:  # a multiset: each row counts
        return f"{verb} {_rows(len(rows))} at epoch {epoch}"
    changed = len(after - before) if inserting else len(before - after)
    text = f"{verb} {_rows(changed)}"
    unchanged = len(set(rows)) - changed
    if unchanged > 0:
        text += f" ({unchanged} {'already present' if inserting else 'absent'})"
    replaced = len(before - after) if inserting else 0
    if replaced:  # last_write_wins: the old value of each key is retracted
        text += f", replacing {_rows(replaced)}"
    return f"{text} at epoch {epoch}"


def _rows(n: int) -> str:
    return f"{n} row{'' if n == 1 else 's'}"


def _open_braces(text: str) -> int:
    """How many `{` of `text` are not closed yet (strings and comments aside)."""
    code = _NOT_CODE.sub(" ", text)
    return code.count("{") - code.count("}")


def _query_text(text: str) -> str:
    text = text.strip()
    if not text:
        raise DatalogError("a query is missing, e.g. `reach(1, y)`")
    return text


def _watch_number(text: str, watches: dict[int, Any]) -> int:
    if not text.isdigit() or int(text) not in watches:
        known = ", ".join(map(str, watches)) or "none"
        raise DatalogError(f"no watch `{text}` (active: {known})")
    return int(text)


def _print_change(number: int, query: str, change: Change) -> None:
    if change.snapshot:
        n = len(change.rows)
        print(f"[watch {number}] {query} at epoch {change.epoch}: {n} row{'' if n == 1 else 's'}")
    else:
        print(f"[watch {number}] epoch {change.epoch}:")
    for line in change_lines(change):
        print(f"  {line}")


def parse_rows(text: str) -> list[tuple[Any, ...]]:
    """`(1, "a") (2, "b")` as rows; a bare value (`1 2 3`) is a one-column row."""
    rows: list[tuple[Any, ...]] = []
    current: list[Any] | None = None
    pos = 0
    while text[pos:].strip():
        match = _TOKEN.match(text, pos)
        if match is None:
            raise DatalogError(_unreadable(text, pos))
        pos = match.end()
        kind = match.lastgroup
        if kind == "open" and current is None:
            current = []
        elif kind == "close" and current is not None:
            rows.append(tuple(current))
            current = None
        elif kind in ("string", "number"):
            value = _value(match.group(kind or ""), kind or "")
            if current is None:
                rows.append((value,))
            else:
                current.append(value)
        elif kind != "comma":
            raise DatalogError(f"unbalanced parentheses in `{text.strip()}`")
    if current is not None:
        raise DatalogError(f"a row is not closed in `{text.strip()}`")
    return rows


def _unreadable(text: str, pos: int) -> str:
    """Why the rows cannot be read at `pos`: `1_000` is a number the tokens stopped in."""
    number = re.search(r"[+-]?[0-9][0-9.eE+-]*\Z", text[:pos])
    if text.startswith("_", pos) and number is not None:
        written = number.group() + re.match(r"[\w.]*", text[pos:]).group()  # type: ignore[union-attr]
        return f"`{written}` is not a number: a number cannot contain `_`"
    return f"cannot read rows at `{text[pos:].strip()[:20]}`"


def _value(token: str, kind: str) -> Any:
    if kind == "string":
        return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), token[1:-1])
    if re.fullmatch(r"[+-]?\d+", token):
        return int(token)
    return float(token)
