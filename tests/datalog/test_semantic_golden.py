"""Golden catalogue of semantically bad programs and their exact error texts.

Each `golden/semantic/<case>.dl` (first line `// title: ...`) must fail the
checker with exactly the text in `<case>.expected`. Regenerate the expected
files with `UPDATE_GOLDEN=1 pytest tests/datalog/test_semantic_golden.py` and
review the diff.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from datalog.lang.checks import check_program
from datalog.lang.errors import (
    DatalogErrors,
    DatalogSemanticError,
    DatalogSyntaxError,
    UnsupportedError,
)
from datalog.lang.parser import parse_program

GOLDEN = Path(__file__).parent / "golden" / "semantic"
CASES = sorted(GOLDEN.glob("*.dl"))


def test_the_catalogue_is_not_empty() -> None:
    assert len(CASES) >= 15


def test_the_catalogue_reports_several_errors_together() -> None:
    expected = [p.with_suffix(".expected") for p in CASES]
    texts = [path.read_text() for path in expected if path.exists()]  # new cases: UPDATE_GOLDEN
    assert any(re.match(r"[3-9] errors:", text) for text in texts)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_semantic_error_text(path: Path) -> None:
    source = path.read_text()
    assert source.startswith("// title: "), "each case starts with a `// title:` line"
    program = parse_program(source)  # a syntax error here is a broken case
    # a Soufflé construct Deltalog refuses is an UnsupportedError, also a checker's error
    with pytest.raises((DatalogSemanticError, DatalogErrors, UnsupportedError)) as caught:
        check_program(program)
    assert not isinstance(caught.value, DatalogSyntaxError)
    text = str(caught.value) + "\n"
    expected = path.with_suffix(".expected")
    if os.environ.get("UPDATE_GOLDEN"):
        expected.write_text(text)
    assert text == expected.read_text()
