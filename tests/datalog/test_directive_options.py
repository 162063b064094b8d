"""Every option of `.input`/`.output`/`.printsize` is one Deltalog reads, or an
error at the option: never accepted and ignored."""

from __future__ import annotations

import pytest

from datalog import Database
from datalog.lang.errors import DatalogError, UnknownNameError, UnsupportedError

DECL = ".decl edge(x: number, y: number)\n"


@pytest.mark.parametrize(
    ("directive", "error", "message", "at"),
    [
        ('.input edge(filename="x", delimiter=",", bogus=1)', UnknownNameError,
         "unknown option `bogus` of `.input` (it takes `IO`, `filename`", "bogus"),
        ('.input edge(filname="x")', UnknownNameError,
         "unknown option `filname` of `.input`; did you mean `filename`?", "filname"),
        ('.output edge(delimeter=",")', UnknownNameError, "did you mean `delimiter`?", "delimeter"),
        (".input edge(header=true)", UnknownNameError, "did you mean `headers`?", "header"),
        (".input edge(compress=true)", UnsupportedError,
         "the option `compress` of `.input` is not supported", "compress"),
        (".input edge(rfc4180=true)", UnsupportedError, "`rfc4180`", "rfc4180"),
        (".input edge(IO=stdin)", UnsupportedError, "`IO=stdin` is not supported", "IO"),
        (".output edge(IO=sqlite)", UnsupportedError, "`IO=sqlite` is not supported", "IO"),
        (".input edge(headers=yes)", UnknownNameError, "`headers` is `true` or `false`", "headers"),
        ('.input edge(delimiter="")', UnsupportedError, "empty `delimiter`", "delimiter"),
        (".printsize edge(x=1)", UnknownNameError, "(it takes none)", "x"),
    ],
)  # fmt: skip
def test_an_option_nobody_reads_is_an_error_at_the_option(
    directive: str, error: type[DatalogError], message: str, at: str
) -> None:
    db = Database()
    with pytest.raises(error) as caught:
        db.define(DECL + directive)
    assert message in caught.value.message
    assert (caught.value.line, caught.value.column) == (2, directive.index(at + "=") + 1)
    assert db.checked.schema.get("edge") is None


def test_the_options_deltalog_reads_are_accepted() -> None:
    db = Database()
    db.define(
        DECL + '.input edge(IO=file, filename="e.csv", delimiter=",", headers=true)\n'
        '.output edge(IO=stdout, delimiter="\\t", headers=false, filename="out.tsv")\n'
        ".printsize edge"
    )
    assert [d.kind for d in db.checked.directives] == ["input", "output", "printsize"]
