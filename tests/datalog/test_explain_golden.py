"""`explain` pinned byte for byte: nine queries by three join plans, one-shot and
with the query live, in text and in DOT. Planning moves between passes and lowering
(docs/adr/0051, 0058) must not change a line of what explain prints.

Regenerate (only for an intended change of the output, and review the diff):
`PYTHONPATH=. python -m tests.datalog.test_explain_golden`.
"""

from __future__ import annotations

from pathlib import Path

from datalog.db.database import Database

GOLDEN = Path(__file__).parent / "golden" / "explain"

PROGRAM = """
.decl edge(x: number, y: number)
.decl weight(x: number, y: number, w: number)
.decl size(s: symbol, n: number)
.decl reach(x: number, y: number)
.decl tri(x: number, y: number, z: number)
.decl hop(x: number, z: number)
.decl lonely(x: number)
.decl deg(x: number, n: number)
.decl dist(x: number, d: number)
.decl slot(s: symbol, i: number)
reach(x, y) :- edge(x, y).
reach(x, z) :- reach(x, y), edge(y, z).
tri(x, y, z) :- edge(x, y), edge(y, z), edge(z, x), x < y.
hop(x, z) :- edge(x, y), edge(y, z), !edge(x, z).
lonely(x) :- edge(x, _), !edge(x + 1, x).
deg(x, n) :- edge(x, _), n = count : { edge(x, _) }.
dist(1, 0).
dist(y, d + w) :- dist(x, d), weight(x, y, w).
dist(x, d1) <= dist(x, d2) :- d2 < d1.
slot(s, i) :- size(s, n), i = range(0, n).
"""

QUERIES = (
    "reach(1, y)",
    "reach(x, y)",
    "tri(x, y, z)",
    "hop(x, z), x != z",
    "lonely(x)",
    "deg(x, n), n > 1",
    "dist(x, d)",
    "slot(s, i), j = i * 2, j = range(0, 4)",
    "n = count : { edge(x, y), edge(y, z), edge(z, x) }, edge(a, _), a < n",
)
PLANS = ("auto", "wcoj", "binary")


def golden_database() -> Database:
    db = Database()
    db.define(PROGRAM)
    db.insert("edge", [(1, 2), (2, 3), (3, 1), (3, 4)])
    db.insert("weight", [(1, 2, 5), (2, 3, 1), (1, 3, 9)])
    db.insert("size", [("pair", 2), ("trio", 3)])
    return db


def explained() -> str:
    """Every query's explanation under every plan, one-shot then live, text then DOT."""
    parts = []
    for number, query in enumerate(QUERIES):
        for plan in PLANS:
            db = golden_database()
            for when in ("one-shot", "live"):
                if when == "live":
                    db.subscribe(query, lambda change: None, plan=plan)
                for form in ("text", "dot"):
                    parts.append(f"=== {number} {query} | plan={plan} | {when} | {form}")
                    parts.append(db.explain(query, plan=plan, format=form))
    return "\n".join(parts) + "\n"


def test_explain_prints_the_golden_text_and_graphs() -> None:
    expected = (GOLDEN / "explain.txt").read_text()
    got = explained()
    if got != expected:  # the first differing section, readable
        for mine, theirs in zip(got.split("\n=== "), expected.split("\n=== "), strict=False):
            assert mine == theirs
    assert got == expected


if __name__ == "__main__":  # pragma: no cover
    GOLDEN.mkdir(parents=True, exist_ok=True)
    (GOLDEN / "explain.txt").write_text(explained())
