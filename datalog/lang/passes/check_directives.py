"""Pass: every option of an `.input`, `.output` or `.printsize` is one Deltalog reads.

Layer: datalog. Imports the AST and errors. An option nobody reads was silently
ignored (`.input edge(filename="x", bogus=1)`): now an unknown option is an
`UnknownNameError` with a did-you-mean, and an option Soufflé knows but Deltalog
does not implement (`compress`, `rfc4180`...) an `UnsupportedError`, each at the
option. Values are checked where they have few: `IO` (`file`; `stdout` for an
output), `headers` (`true` or `false`), `delimiter` (not empty).
"""

from __future__ import annotations

import re

from datalog.lang.ast import Directive, Span
from datalog.lang.errors import UnknownNameError, UnsupportedError, did_you_mean
from datalog.lang.passes.context import CheckContext

# The options `datalog.io.sources.csv` reads, by directive kind.
KNOWN: dict[str, tuple[str, ...]] = {
    "input": ("IO", "filename", "delimiter", "headers"),
    "output": ("IO", "filename", "delimiter", "headers"),
    "printsize": (),
}
# Soufflé's own options that Deltalog does not implement (reading or writing files
# with them would give other rows than Soufflé, not an error).
SOUFFLE_ONLY = ("compress", "rfc4180", "columns", "attributeNames", "dbname", "params")
_IO = {"input": ("file",), "output": ("file", "stdout"), "printsize": ()}


def check_directives(ctx: CheckContext) -> None:
    for directive in ctx.program.directives:
        for key, value in directive.options:
            problem = _problem(directive, key, value)
            if problem is not None:
                kind, message = problem
                ctx.report(kind, message, _option_span(directive, key))


def _problem(
    directive: Directive, key: str, value: str
) -> tuple[type[UnknownNameError] | type[UnsupportedError], str] | None:
    of = f"`.{directive.kind}`"
    known = KNOWN[directive.kind]
    if key in SOUFFLE_ONLY:
        return UnsupportedError, f"the option `{key}` of {of} is not supported"
    if key not in known:
        listed = ", ".join(f"`{k}`" for k in known) or "none"
        hint = did_you_mean(key, known) or f" (it takes {listed})"
        return UnknownNameError, f"unknown option `{key}` of {of}{hint}"
    if key == "IO" and value.lower() not in _IO[directive.kind]:
        kinds = " or ".join(f"`{k}`" for k in _IO[directive.kind])
        return UnsupportedError, f"`IO={value}` is not supported for {of}: it takes {kinds}"
    if key == "headers" and value.lower() not in ("true", "false"):
        return UnknownNameError, f"`headers={value}`: `headers` is `true` or `false`"
    if key == "delimiter" and not value:
        return UnsupportedError, "an empty `delimiter` separates nothing"
    return None


def _option_span(directive: Directive, key: str) -> Span:
    """Where `key=` stands in the directive (options keep no span of their own)."""
    span = directive.span
    text = span.source[span.start : span.end] if span.source else ""
    found = re.search(rf"(?<![\w.]){re.escape(key)}\s*=", text)
    if found is None:
        return span
    start = span.start + found.start()
    line = span.source.count("\n", 0, start) + 1
    column = start - (span.source.rfind("\n", 0, start) + 1) + 1
    return Span(line, column, line, column + len(key), start, start + len(key), span.source)
