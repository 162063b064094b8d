"""The stand-alone parser (ADR 0084): lark's generated module, cached by exact key.

Twin: every program parses to the same AST with it and with lark itself. Its cache:
a file is run only under exactly this grammar, lark version and Python; a changed
key, a corrupt file, code that fails, a cache that cannot be written all end in a
parser that works (the stand-alone one made again, or lark's). And a `deltalog run`
whose parser is cached loads neither lark nor what lark loads.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import given, settings

from bench.analysis_data import CRDT, CSPA
from datalog.lang import ast, parser, standalone
from datalog.lang.errors import DatalogSyntaxError
from datalog.lang.parser import parse_program, parse_query
from datalog.lang.pretty import format_program
from tests.budget import examples
from tests.datalog.programs import Generated, programs
from tests.datalog.strategies import programs as syntax_trees

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = sorted((ROOT / "tests" / "datalog" / "golden").glob("*/*.dl"))
EXAMPLES = sorted((ROOT / "datalog" / "cli" / "examples").glob("*.dl"))


@pytest.fixture(autouse=True, scope="module")
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The twins' parser made in a cache of their own (the user's may not be writable)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("twins")))
        standalone.standalone_parser.cache_clear()
        yield
    standalone.standalone_parser.cache_clear()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private cache directory, with no parser made or loaded yet."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    standalone.standalone_parser.cache_clear()
    yield tmp_path / "deltalog"
    standalone.standalone_parser.cache_clear()


def by_lark(text: str, query: bool = False) -> ast.Program | ast.Query:
    """`text` parsed by lark itself (no stand-alone parser)."""
    with mock.patch.object(parser, "standalone_parser", lambda: None):
        return _parsed(text, query)


def _parsed(text: str, query: bool) -> ast.Program | ast.Query:
    return parse_query(text) if query else parse_program(text)


def both(text: str, query: bool = False) -> tuple[object, object]:
    """What the stand-alone parser and lark make of `text`: the tree with every span,
    or the error's text."""
    found = []
    for parse in (_parsed, by_lark):
        try:
            found.append(shape(parse(text, query)))
        except DatalogSyntaxError as error:
            found.append(str(error))
    assert standalone.standalone_parser() is not None
    return found[0], found[1]


def shape(node: object) -> object:
    """`node` as nested tuples, spans included (an AST's equality leaves them out)."""
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        fields = dataclasses.fields(node)
        return (type(node).__name__, *(shape(getattr(node, f.name)) for f in fields))
    if isinstance(node, list | tuple):
        return tuple(shape(item) for item in node)
    if isinstance(node, dict):
        return tuple((shape(k), shape(v)) for k, v in node.items())
    # no parser object stays in the tree: a stand-alone module's (its tokens) would not
    # unpickle in a process that has not made it
    assert not type(node).__module__.startswith(("lark", standalone.MODULE)), type(node)
    return node


def files() -> list[Path]:
    return [*GOLDEN, *EXAMPLES]


@pytest.mark.parametrize("path", files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_golden_programs_parse_alike_with_and_without_lark(path: Path) -> None:
    fast, slow = both(path.read_text(encoding="utf-8"))
    assert fast == slow


@pytest.mark.parametrize("text", [CSPA, CRDT, "reach(1, y)", "r(x), !s(x), x < 3."])
def test_programs_and_queries_parse_alike_with_and_without_lark(text: str) -> None:
    fast, slow = both(text, query=not text.lstrip().startswith("."))
    assert fast == slow


@settings(max_examples=examples(40), deadline=None)
@given(programs())
def test_generated_programs_parse_alike_with_and_without_lark(generated: Generated) -> None:
    fast, slow = both(generated.text)
    assert fast == slow


@settings(max_examples=examples(40), deadline=None)
@given(syntax_trees)
def test_printed_syntax_trees_parse_alike_with_and_without_lark(program: ast.Program) -> None:
    fast, slow = both(format_program(program))
    assert fast == slow


def test_the_parser_is_cached_privately_and_loaded_from_the_cache(cache: Path) -> None:
    assert parse_program("a(1).").rules
    made = list(cache.glob("parser-*.bin"))
    assert len(made) == 1 and cache.stat().st_mode & 0o077 == 0
    standalone.standalone_parser.cache_clear()
    assert made_during(lambda: parse_program("a(2).")) == []  # loaded, not made


def made_during(action: Callable[[], object]) -> list[str]:
    """The grammars the stand-alone module was made from while `action` ran."""
    calls: list[str] = []
    real = standalone._made

    def made(text: str) -> types.CodeType | None:
        calls.append(text)
        return real(text)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(standalone, "_made", made)
        action()
    return calls


def made_again_after(cache: Path, change: Callable[[], None]) -> list[str]:
    """The grammars the stand-alone module is made from again, once a parser was
    cached and `change` ran."""
    assert parse_program("a(1).").rules
    standalone.standalone_parser.cache_clear()
    change()

    def parse() -> None:
        assert parse_program("a(2).").rules
        assert standalone.standalone_parser() is not None

    return made_during(parse)


def test_another_lark_version_never_loads_the_cached_module(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def upgrade() -> None:
        monkeypatch.setattr(standalone, "_lark_version", lambda: "99.0.0")

    assert len(made_again_after(cache, upgrade)) == 1


def test_a_file_under_another_key_is_never_run(cache: Path) -> None:
    """Whatever its name, a file whose stored key is not exactly this process's is
    made again, not run (here its code would end the test)."""

    def plant() -> None:
        (path,) = cache.glob("parser-*.bin")
        data = path.read_bytes()
        size = int.from_bytes(data[:8], "little")
        key = data[8 : 8 + size]
        other = key[:-1] + bytes([key[-1] ^ 1])  # one bit of the grammar's text
        code = compile("raise SystemExit('a stale parser ran')", "<stale>", "exec")
        import marshal

        path.write_bytes(data[:8] + other + marshal.dumps(code))

    assert len(made_again_after(cache, plant)) == 1


@pytest.mark.parametrize("damage", [b"", b"\x00" * 7, b"garbage"])
def test_a_corrupt_cache_file_is_made_again(cache: Path, damage: bytes) -> None:
    def corrupt() -> None:
        (path,) = cache.glob("parser-*.bin")
        data = path.read_bytes()
        size = int.from_bytes(data[:8], "little")
        path.write_bytes(data[: 8 + size] + damage if damage else data[:3])

    assert len(made_again_after(cache, corrupt)) == 1
    (path,) = cache.glob("parser-*.bin")
    assert standalone._cached(path, standalone._key(*_key_parts())) is not None  # rewritten


def _key_parts() -> tuple[str, str]:
    from datalog.lang import grammar

    version = standalone._lark_version()
    assert version is not None
    return grammar.GRAMMAR_PATH.read_text(encoding="utf-8"), version


def test_code_that_fails_when_run_leaves_lark_to_parse(cache: Path) -> None:
    text, version = _key_parts()
    key = standalone._key(text, version)
    cache.mkdir(mode=0o700)
    code = compile("raise RuntimeError('broken')", "<broken>", "exec")
    name = f"parser-{sys.version_info[0]}.{sys.version_info[1]}-"
    import zlib

    standalone._store(cache / f"{name}{zlib.crc32(key):08x}.bin", key, code)
    assert standalone.standalone_parser() is None
    assert parse_program("a(1).").rules
    with pytest.raises(DatalogSyntaxError, match="line 1"):
        parse_program("a(1)")


def test_a_cache_that_cannot_be_written_leaves_lark_to_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    standalone.standalone_parser.cache_clear()
    try:
        assert standalone.standalone_parser() is None
        assert parse_program("a(1).").rules
    finally:
        standalone.standalone_parser.cache_clear()


def test_a_cache_file_that_cannot_be_replaced_still_gives_a_parser(cache: Path) -> None:
    text, version = _key_parts()
    key = standalone._key(text, version)
    name = f"parser-{sys.version_info[0]}.{sys.version_info[1]}-"
    import zlib

    (cache / f"{name}{zlib.crc32(key):08x}.bin").mkdir(parents=True)  # in the file's place
    assert standalone.standalone_parser() is not None
    assert parse_program("a(1).").rules
    assert not list(cache.glob("*.part"))


def test_syntax_errors_are_lark_s_explained(cache: Path) -> None:
    bad = "size(n) :- n = count { edge(_, _) }."
    with pytest.raises(DatalogSyntaxError, match="an aggregate needs `:` before its body"):
        parse_program(bad)
    assert standalone.standalone_parser() is not None


def modules_after(code: str, cache: Path) -> set[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache.parent)}
    program = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_a_run_with_its_parser_cached_loads_neither_lark_nor_openssl(
    cache: Path, tmp_path: Path
) -> None:
    """lark, and what it loads (OpenSSL through hashlib, `regex`, `tempfile`): 8 MiB
    resident that every `deltalog run` paid to parse its program (ADR 0084)."""
    (tmp_path / "e.facts").write_text("1\t2\n2\t3\n")
    program = tmp_path / "p.dl"
    program.write_text(".decl e(a: number, b: number)\n.input e\n.printsize e\nr(x) :- e(x, _).")
    program.write_text(program.read_text() + "\n.decl r(a: number)\n.printsize r\n")
    run = ["run", str(program), "-F", str(tmp_path)]
    code = f"from datalog.cli.commands import main\nassert main({run!r}) == 0"
    first = modules_after(code, cache)  # makes the stand-alone parser
    assert "lark" in first
    later = modules_after(code, cache)
    assert {"lark", "regex", "hashlib", "_hashlib", "tempfile"} & later == set()
    assert standalone.MODULE in later


def test_a_text_parsed_again_is_built_once_and_a_bad_one_fails_each_time() -> None:
    """Parsed trees are remembered by text and parser (they are immutable): a query
    read after each commit is parsed once; lark, asked for the same text, parses it
    itself; a text with an error raises every time, with its position."""
    parsed: list[str] = []
    real = parser._parse

    def spied(source: object, start: str, fast: object) -> object:
        parsed.append(start)
        return real(source, start, fast)  # type: ignore[arg-type]

    text = "reach(7, y), y != 10417"
    with mock.patch.object(parser, "_parse", spied):
        trees = [parse_query(text) for _ in range(3)]
        assert parsed == ["query"] and trees[0] is trees[1] is trees[2]
        assert shape(by_lark(text, query=True)) == shape(trees[0])
        assert parsed == ["query", "query"]
        for _ in range(2):
            with pytest.raises(DatalogSyntaxError, match="line 1, column 13"):
                parse_query("reach(7, y),, y != 10417")
        assert parsed == ["query"] * 4
