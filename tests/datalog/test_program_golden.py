"""Golden small programs: the Database and the reference evaluator both give the expected rows.

Each `golden/programs/<case>.dl` (first line `// title: ...`) is a classic
program with its facts; its `.output` directives name the relations to check.
`<case>.expected` holds those relations' rows, relation by relation in
directive order, rows sorted, one `relation: row` line each (values written as
Datalog constants). Programs may call the user-defined functors of `FUNCTORS`
(declared with `.functor` in the program). Regenerate with
`UPDATE_GOLDEN=1 pytest tests/datalog/test_program_golden.py` (from the
reference evaluator) and review the diff.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

from datalog.db.database import Database
from datalog.eval import reference
from datalog.eval.functors import bind_program, bindings, vectorized
from datalog.lang.checks import CheckedProgram, check_program
from datalog.lang.parser import parse_program

GOLDEN = Path(__file__).parent / "golden" / "programs"
CASES = sorted(GOLDEN.glob("*.dl"))

# The Python functions golden programs may bind their `.functor`s to.
FUNCTORS = {
    "slug": lambda s: s.lower().replace(" ", "-"),
    "clamp": lambda x, low, high: min(max(x, low), high),
    "hypot": vectorized(np.hypot),
    "digits": vectorized(lambda n: np.array([len(str(abs(v))) for v in n.tolist()])),
    "initial": vectorized(lambda s: np.array([w[:1].upper() for w in s], dtype=object)),
}


def value_text(value: object) -> str:
    return json.dumps(value) if isinstance(value, str) else repr(value)


def render(relation: str, rows: Iterable[tuple[object, ...]]) -> list[str]:
    def row_text(row: tuple[object, ...]) -> str:
        return ", ".join(value_text(v) for v in row) if row else "()"

    return [f"{relation}: {row_text(row)}" for row in sorted(rows)]


def outputs(checked: CheckedProgram) -> list[str]:
    names = [d.relation for d in checked.directives if d.kind == "output"]
    return list(dict.fromkeys(names))


def query_of(checked: CheckedProgram, relation: str) -> str:
    arity = checked.schema.get(relation).arity  # type: ignore[union-attr]
    return f"{relation}({', '.join(f'x{i}' for i in range(arity))})"


def engine_text(source: str, checked: CheckedProgram) -> str:
    db = Database(functors=FUNCTORS)
    db.define(source)
    lines: list[str] = []
    for relation in outputs(checked):
        lines += render(relation, db.query(query_of(checked, relation)))
    return "\n".join(lines) + "\n"


def reference_text(checked: CheckedProgram) -> str:
    relations = reference.evaluate(bind_program(checked, bindings(FUNCTORS)), {})
    lines: list[str] = []
    for relation in outputs(checked):
        lines += render(relation, relations[relation])
    return "\n".join(lines) + "\n"


def test_the_catalogue_has_the_classics() -> None:
    assert len(CASES) >= 10


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_program_output(path: Path) -> None:
    source = path.read_text()
    assert source.startswith("// title: "), "each case starts with a `// title:` line"
    checked = check_program(parse_program(source))
    assert outputs(checked), "each case names its output relations"
    expected_path = path.with_suffix(".expected")
    from_reference = reference_text(checked)
    if os.environ.get("UPDATE_GOLDEN"):
        expected_path.write_text(from_reference)
    expected = expected_path.read_text()
    assert from_reference == expected, "the reference evaluator"
    assert engine_text(source, checked) == expected, "the Database"
