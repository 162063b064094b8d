"""The grammar, loaded once as an LALR parser (its tables cached on disk).

Layer: datalog (language). Imports `lark` (when the parser is first made),
`datalog.lang.ast` and the budget check of
`differential.dataflow`: lexing a long text stops with the running computation's
time budget (every `_Pacer.EVERY` tokens), as the dataflow steps do.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from datalog.lang import ast
from differential.dataflow import check_budget

if TYPE_CHECKING:  # lark is imported by the first parse, not by `import datalog`
    from lark import Lark, Token
    from lark.tree import Meta

GRAMMAR_PATH = Path(__file__).with_name("grammar.lark")


@functools.cache
def lark_parser() -> Lark:
    """The parser, with two start symbols (`program`, `query`)."""
    from lark import Lark

    grammar = GRAMMAR_PATH.read_text(encoding="utf-8")
    return Lark(
        grammar, **LARK_OPTIONS, cache=_grammar_cache(grammar), lexer_callbacks=paced(grammar)
    )


# How the grammar is made a parser (also the stand-alone parser's, `datalog.lang.standalone`).
LARK_OPTIONS: dict[str, object] = {
    "parser": "lalr",
    "propagate_positions": True,
    "start": ["program", "query"],
}


def paced(grammar: str) -> dict[str, _Pacer]:
    """The lexer callbacks that check the budget: one on every named terminal."""
    return dict.fromkeys(_TERMINAL.findall(grammar), _PACER)


_TERMINAL = re.compile(r"^([A-Z_][A-Z0-9_]*)(?:\.\d+)?\s*:", re.MULTILINE)


class _Pacer:
    """A lexer callback on every named terminal: every `EVERY` tokens (comments
    included), the budget is checked, so a huge text cannot hold the engine past it."""

    EVERY = 4096

    def __init__(self) -> None:
        self.tokens = 0

    def __call__(self, token: Token) -> Token:
        self.tokens += 1
        if not self.tokens % self.EVERY:
            check_budget()
        return token


_PACER = _Pacer()


def _grammar_cache(grammar: str) -> str | bool:
    """Where lark keeps the built LALR tables (the first parse: 80 ms -> 10 ms).

    A private directory of the user's cache (the tables are pickled, so never a
    shared temporary directory); False (build every time) when there is none.
    Lark checks the grammar's digest stored in the file and rebuilds on any mismatch;
    the file is named after the grammar's digest too, so installed versions with
    different grammars keep their own tables instead of rebuilding each other's.
    """
    import hashlib  # (OpenSSL's 3 MiB: only where lark, which loads it anyway, is used)

    folder = cache_folder()
    if folder is None:
        return False
    digest = hashlib.sha256(grammar.encode()).hexdigest()[:12]
    return str(folder / f"grammar-{sys.version_info[0]}.{sys.version_info[1]}-{digest}.lark")


def cache_folder() -> Path | None:
    """The directory of the user's cache where built parsers are kept (made private,
    0o700); None when it cannot be made or written."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = Path(root) / "deltalog"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(folder, os.W_OK):
        return None
    return folder


def span_of(where: Meta | Token, source: str = "") -> ast.Span:
    """The span of a tree node or a token (1-based line and column, 0-based offsets)
    in the text `source`."""
    if getattr(where, "empty", False):
        return ast.NOWHERE
    w = where
    line, column, end_line, end_column, start, end = (
        n or 0 for n in (w.line, w.column, w.end_line, w.end_column, w.start_pos, w.end_pos)
    )
    return ast.Span(line, column, end_line, end_column, start, end, source)
