"""Golden catalogue of malformed programs and their exact syntax error texts.

Each `golden/syntax/<case>.dl` (first line `// title: ...`) must fail to parse
with exactly the text in `<case>.expected`: message, position, source line and
caret. Regenerate the expected files with
`UPDATE_GOLDEN=1 pytest tests/datalog/test_syntax_golden.py` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from datalog.lang.errors import DatalogSyntaxError
from datalog.lang.parser import parse_program

GOLDEN = Path(__file__).parent / "golden" / "syntax"
CASES = sorted(GOLDEN.glob("*.dl"))


def test_the_catalogue_covers_at_least_fifteen_programs() -> None:
    assert len(CASES) >= 15


def test_the_catalogue_shows_at_least_fifteen_distinct_messages() -> None:
    first_lines = {p.with_suffix(".expected").read_text().splitlines()[0] for p in CASES}
    assert len(first_lines) >= 15


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_syntax_error_text(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert source.startswith("// title: "), "each case starts with a `// title:` line"
    with pytest.raises(DatalogSyntaxError) as caught:
        parse_program(source)
    text = str(caught.value) + "\n"
    expected = path.with_suffix(".expected")
    if os.environ.get("UPDATE_GOLDEN"):
        expected.write_text(text, encoding="utf-8")
    assert text == expected.read_text(encoding="utf-8")
