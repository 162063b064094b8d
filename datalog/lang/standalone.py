"""The grammar's parser without lark: the stand-alone module lark generates, cached.

Layer: datalog (language). Imports `datalog.lang.grammar` (the grammar, its options,
the lexer's budget callbacks and the cache directory); lark only to generate the
module, the first time a grammar is parsed with a given lark and Python.

`import lark` costs 8 MiB resident (lark, OpenSSL through `hashlib`, `regex`,
`tempfile`...) and every `deltalog run` paid it to parse a program (ADR 0084). Lark's
stand-alone generator writes the LALR tables and lark's run-time (lexer, parser,
`Tree`, `Token`) as one Python module that imports none of them. That module is
generated from `grammar.lark` (still the one source of truth), compiled, and kept in
the user's cache (`grammar.cache_folder`) as marshalled code behind a key that holds
the grammar's whole text, lark's version, the options and the Python bytecode
version: a file whose key is not exactly this process's is never run, it is made
again. When the cache cannot be written or read, or the module cannot be made,
`standalone_parser` is None and the parser uses lark itself.

Only parsing goes through it: a text that does not parse is parsed again by lark,
whose error `datalog.lang.syntax_errors` explains (the same grammar and the same LALR
algorithm fail on the same token).
"""

from __future__ import annotations

import functools
import importlib.util
import io
import marshal
import os
import re
import sys
import threading
import types
import zlib
from pathlib import Path
from typing import Any, NamedTuple

from datalog.lang import grammar

# Bumped whenever what `_source` makes of lark's output changes.
FORMAT = "deltalog-standalone-1"
# The stand-alone module's name in `sys.modules`.
MODULE = "_deltalog_lark_standalone"
# Lark's stand-alone module imports `regex` when it is installed (2 MiB) and uses it only
# for the `regex=True` option and `\p{...}` patterns, neither of which the grammar uses.
_OPTIONAL_REGEX = (
    "try:\n    import regex\n    _has_regex = True\nexcept ImportError:\n    _has_regex = False\n"
)


class Standalone(NamedTuple):
    """A parser made from the stand-alone module, its tree class and its parse errors."""

    parser: Any
    tree: type
    error: type[Exception]


@functools.cache
def standalone_parser() -> Standalone | None:
    """The stand-alone parser of the grammar (made or loaded once a process), or None."""
    folder = grammar.cache_folder()
    version = _lark_version()
    if folder is None or version is None:
        return None
    text = grammar.GRAMMAR_PATH.read_text(encoding="utf-8")
    key = _key(text, version)
    name = f"parser-{sys.version_info[0]}.{sys.version_info[1]}-{zlib.crc32(key):08x}.bin"
    path = folder / name
    code = _cached(path, key)
    if code is None:
        code = _made(text)
        if code is None:
            return None
        _store(path, key, code)
    module = types.ModuleType(MODULE)
    sys.modules[MODULE] = module  # (its dataclasses look their module up)
    try:
        exec(code, module.__dict__)  # lark's module, compiled by this process
        parser = module.Lark_StandAlone(lexer_callbacks=grammar.paced(text))
        del module.DATA, module.MEMO  # the tables as made, now the parser's own (0.8 MiB)
    except Exception:  # whatever went wrong, lark itself still parses
        del sys.modules[MODULE]
        return None
    return Standalone(parser, module.Tree, module.UnexpectedInput)


def _key(text: str, lark_version: str) -> bytes:
    """What a cached module must have been made from, exactly: the grammar's `text`."""
    options = repr(grammar.LARK_OPTIONS)
    made_from = (FORMAT, importlib.util.MAGIC_NUMBER.hex(), lark_version, options, text)
    return "\n".join(made_from).encode()


def _lark_version() -> str | None:
    """The installed lark's version, read from its package without importing it."""
    spec = importlib.util.find_spec("lark")
    if spec is None or spec.origin is None:
        return None
    try:
        text = Path(spec.origin).read_text(encoding="utf-8")
    except OSError:
        return None
    found = re.search(r"""^__version__\s*(?::\s*str\s*)?=\s*["']([^"']+)["']""", text, re.M)
    return found[1] if found else None


def _cached(path: Path, key: bytes) -> types.CodeType | None:
    """The code stored at `path` under exactly `key`, or None."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    head = len(key).to_bytes(8, "little") + key
    if not data.startswith(head):
        return None
    try:
        code = marshal.loads(data[len(head) :])
    except (EOFError, ValueError, TypeError):
        return None
    return code if isinstance(code, types.CodeType) else None


def _made(text: str) -> types.CodeType | None:
    """The stand-alone module of the grammar `text`, compiled; None without lark."""
    try:
        from lark import Lark
        from lark.tools.standalone import gen_standalone
    except ImportError:
        return None
    generated = io.StringIO()
    gen_standalone(Lark(text, **grammar.LARK_OPTIONS), out=generated)
    return compile(_source(generated.getvalue()), "<deltalog: lark stand-alone parser>", "exec")


def _source(generated: str) -> str:
    """Lark's module, without its optional import of `regex`."""
    return generated.replace(_OPTIONAL_REGEX, "_has_regex = False\n", 1)


def _store(path: Path, key: bytes, code: types.CodeType) -> None:
    """Write `code` under `key` to `path` at once (a reader sees the old file or the
    new one); a cache that cannot be written is left as it is."""
    partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        partial.write_bytes(len(key).to_bytes(8, "little") + key + marshal.dumps(code))
        os.replace(partial, path)
    except OSError:
        partial.unlink(missing_ok=True)
