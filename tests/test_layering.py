"""The architecture's rules, checked on the source (DESIGN.md §1, docs/adr/0002).

Imports only point down: `server -> datalog -> joins -> differential`, and `server`
uses only `datalog`. Inside `datalog`, the packages by role are layered the same way
(ADR 0048): `cli -> io -> db -> plan -> eval -> lang`, with `db -> storage -> lang`,
and no package's modules import each other in a circle. PySpark and websockets are
imported only inside functions in the core packages, so `import datalog` stays fast.
Every package says its layer in its `__init__.py` docstring, and no module grows past
a hard cap of lines. No module reaches into another module's private names
(`from m import _x`, or `obj._x` where no `_x` is defined in the module itself): what
modules share is public.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Each package and the project packages it may import (besides itself).
ALLOWED: dict[str, frozenset[str]] = {
    "differential": frozenset(),
    "joins": frozenset({"differential"}),
    "datalog": frozenset({"joins", "differential"}),
    "server": frozenset({"datalog"}),
}
PACKAGES = tuple(ALLOWED)
PROJECT = frozenset({*PACKAGES, "bench", "tests"})
CORE = ("differential", "joins", "datalog")
OPTIONAL_EXTRAS = frozenset({"pyspark", "websockets"})
NOT_ON_IMPORT = frozenset({*OPTIONAL_EXTRAS, "duckdb"})
MAX_LINES = 600  # the house rule is ~500; this is the hard cap


@dataclass(frozen=True)
class Import:
    """One imported module, as an absolute dotted name."""

    path: Path  # relative to the scanned root
    line: int
    module: str
    eager: bool  # runs on import: not inside a function, nor under `if TYPE_CHECKING:`

    @property
    def top(self) -> str:
        return self.module.partition(".")[0]

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.module}"


class _ImportCollector(ast.NodeVisitor):
    def __init__(self, path: Path, package: Sequence[str]) -> None:
        self.path, self.package = path, list(package)
        self.lazy_depth = 0
        self.found: list[Import] = []

    def _add(self, node: ast.stmt, module: str) -> None:
        self.found.append(Import(self.path, node.lineno, module, self.lazy_depth == 0))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = self.package[: len(self.package) - node.level + 1] if node.level else []
        if node.module:
            self._add(node, ".".join([*base, node.module]))
        else:  # `from . import x`: x may be a submodule
            for alias in node.names:
                self._add(node, ".".join([*base, alias.name]))

    def _lazily(self, nodes: Sequence[ast.AST]) -> None:
        self.lazy_depth += 1
        for child in nodes:
            self.visit(child)
        self.lazy_depth -= 1

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._lazily([*node.decorator_list, *node.body])

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._lazily([*node.decorator_list, *node.body])

    def visit_If(self, node: ast.If) -> None:
        test = ast.unparse(node.test)
        if test in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            self._lazily(node.body)
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)


def imports_in(path: Path, root: Path) -> list[Import]:
    """Every import in the file at `path`, relative imports resolved from `root`."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    relative = path.relative_to(root)
    collector = _ImportCollector(relative, relative.parent.parts)
    collector.visit(tree)
    return collector.found


def modules_of(root: Path, package: str) -> Iterator[Path]:
    yield from sorted((root / package).rglob("*.py"))


def layer_violations(root: Path) -> list[str]:
    """Imports of a project package that the importing package may not use."""
    bad = []
    for package, allowed in ALLOWED.items():
        forbidden = PROJECT - allowed - {package}
        for path in modules_of(root, package):
            bad += [
                f"{imp} ({package} may not import {imp.top})"
                for imp in imports_in(path, root)
                if imp.top in forbidden
            ]
    return bad


def eager_optional_imports(root: Path) -> list[str]:
    """Optional extras imported when a core module is imported."""
    return [
        str(imp)
        for package in CORE
        for path in modules_of(root, package)
        for imp in imports_in(path, root)
        if imp.eager and imp.top in OPTIONAL_EXTRAS
    ]


def oversized_modules(root: Path, limit: int = MAX_LINES) -> list[str]:
    sizes = (
        (path, len(path.read_text(encoding="utf-8").splitlines()))
        for package in PACKAGES
        for path in modules_of(root, package)
    )
    return [
        f"{path.relative_to(root)}: {lines} lines > {limit}"
        for path, lines in sizes
        if lines > limit
    ]


# Documented standard-library names that only look private (`os._exit`, namedtuples).
PUBLIC_UNDERSCORED = frozenset({"_exit", "_getframe", "_asdict", "_replace", "_fields", "_make"})


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_UNDERSCORED


def _own_names(tree: ast.Module) -> set[str]:
    """The private names a module defines: its functions, classes and methods, the
    names it assigns, and the attributes it sets (`self._x = ...`, class fields)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            found.add(node.attr)
    return {name for name in found if _private(name)}


def private_reaches(root: Path) -> list[str]:
    """Private names a core module takes from another module."""
    bad = []
    for package in PACKAGES:
        for path in modules_of(root, package):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            own, where = _own_names(tree), path.relative_to(root)
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom):
                    names = [a.name for a in node.names if _private(a.name)]
                    bad += [f"{where}:{node.lineno}: imports {name}" for name in names]
                elif isinstance(node, ast.Attribute) and _private(node.attr):
                    bad += [f"{where}:{node.lineno}: reaches .{node.attr}"] * (node.attr not in own)
    return bad


# --- inside datalog: packages by role (docs/architecture.md, ADR 0048) -------------

# Each datalog package, the datalog packages it may import, and the core packages
# below datalog it may import. `lang` and `eval` take only the budget checks of
# `differential`; only the planner builds `joins` operators.
DATALOG_LAYERS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "lang": (frozenset(), frozenset({"differential"})),
    "eval": (frozenset({"lang"}), frozenset({"differential"})),
    "storage": (frozenset({"lang"}), frozenset()),
    "plan": (frozenset({"lang", "eval"}), frozenset({"differential", "joins"})),
    "db": (frozenset({"lang", "eval", "storage", "plan"}), frozenset({"differential"})),
    "io": (frozenset({"lang", "eval", "db"}), frozenset()),
    "cli": (frozenset({"lang", "eval", "storage", "db", "io", ""}), frozenset()),
}
# "" is the package root, `datalog/__init__.py`: the public names, for the top only.


def datalog_layer_violations(root: Path) -> list[str]:
    """Imports (eager or not) from one datalog package that its layer does not allow,
    and modules outside any package by role."""
    bad = [
        f"{path.relative_to(root)}: a module directly in datalog/ (put it in a package)"
        for path in sorted((root / "datalog").glob("*.py"))
        if path.name != "__init__.py"
    ]
    for package, (siblings, below) in DATALOG_LAYERS.items():
        for path in modules_of(root / "datalog", package):
            for imp in imports_in(path, root):
                parts = imp.module.split(".")
                if imp.top == "datalog":
                    target = parts[1] if len(parts) > 1 and parts[1] in DATALOG_LAYERS else ""
                    if target != package and target not in siblings:
                        bad.append(f"{imp} (datalog.{package} may not import datalog.{target})")
                elif imp.top in CORE and imp.top not in below:
                    bad.append(f"{imp} (datalog.{package} may not import {imp.top})")
    return bad


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph(root: Path, package: str) -> dict[Path, set[Path]]:
    """Each module of `package` -> the modules of its own folder it imports, at any
    depth (in functions and under `TYPE_CHECKING` too: a cycle of types is a cycle).
    `from pkg import name` depends on the submodule `pkg.name` when there is one."""
    files = {_module_name(root, path): path for path in modules_of(root, package)}
    graph: dict[Path, set[Path]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        base = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                parts = base.split(".")
                stem = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
                module = ".".join(p for p in (stem, node.module or "") if p)
                subs = {f"{module}.{a.name}" for a in node.names} & files.keys()
                targets |= subs or {module}
        graph[path] = {
            files[target]
            for target in targets
            if target in files and files[target] != path and files[target].parent == path.parent
        }
    return graph


def import_cycles(root: Path, package: str) -> list[list[str]]:
    """The strongly connected components (of two modules or more) of `module_graph`."""
    graph = module_graph(root, package)
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    cycles: list[list[str]] = []

    def visit(node: Path) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = [stack.pop()]
            while component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(str(p.relative_to(root)) for p in component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


# Cycles known and owned by other work, each with where it goes. None is left (the
# last, `chain <-> later_rounds`, went with the fused rounds' public protocol on the
# operators, ADR 0050); nothing may join.
KNOWN_CYCLES: list[list[str]] = []


# --- the rules, on this repository ---------------------------------------------------


def test_imports_only_point_down_the_layers() -> None:
    assert layer_violations(ROOT) == []


def test_optional_extras_are_imported_only_inside_functions() -> None:
    assert eager_optional_imports(ROOT) == []


@pytest.mark.parametrize("package", CORE)
def test_importing_a_core_package_loads_no_extras_and_no_higher_layer(package: str) -> None:
    code = f"import json, sys, {package}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded = {name.partition(".")[0] for name in json.loads(done.stdout)}
    higher = PROJECT - ALLOWED[package] - {package}
    assert loaded & (NOT_ON_IMPORT | higher) == set()


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_docstring_states_its_layer(package: str) -> None:
    init = ROOT / package / "__init__.py"
    docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    assert docstring is not None, f"{init} has no docstring"
    assert "Layer" in docstring, f"{init}: the docstring must say its Layer"


def test_no_module_exceeds_the_line_cap() -> None:
    assert oversized_modules(ROOT) == []


def test_no_module_reaches_into_another_modules_private_names() -> None:
    assert private_reaches(ROOT) == []


def test_datalog_packages_import_only_the_layers_below() -> None:
    assert datalog_layer_violations(ROOT) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle_inside_a_package(package: str) -> None:
    assert [c for c in import_cycles(ROOT, package) if c not in KNOWN_CYCLES] == []


@pytest.mark.parametrize("package", sorted(DATALOG_LAYERS))
def test_each_datalog_package_docstring_states_its_layer(package: str) -> None:
    init = ROOT / "datalog" / package / "__init__.py"
    docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
    assert docstring is not None, f"{init} has no docstring"
    assert f"Layer: datalog.{package}" in docstring, f"{init}: the docstring must say its Layer"


# --- the checks themselves can fail --------------------------------------------------


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_scanner_finds_upward_and_sideways_imports(tmp_path: Path) -> None:
    _write(tmp_path, "differential/__init__.py", '"""Layer: bottom."""\n')
    _write(
        tmp_path,
        "differential/trace/spine.py",
        "import datalog.api\nfrom joins import delta\nfrom .batch import Batch\n"
        "from ..time import Antichain\nimport numpy\n",
    )
    _write(tmp_path, "server/app.py", "from differential.time import Antichain\n")
    bad = layer_violations(tmp_path)
    assert len(bad) == 3
    assert "spine.py:1: datalog.api" in bad[0]
    assert "spine.py:2: joins (differential may not import joins)" in bad[1]
    assert "server may not import differential" in bad[2]


def test_scanner_resolves_relative_imports(tmp_path: Path) -> None:
    _write(tmp_path, "joins/wcoj/count.py", "from ..extender import X\nfrom . import propose\n")
    found = [imp.module for imp in imports_in(tmp_path / "joins/wcoj/count.py", tmp_path)]
    assert found == ["joins.extender", "joins.wcoj.propose"]


def test_scanner_finds_eager_optional_imports_only(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "datalog/sources.py",
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import pyspark\n"
        "def read(df):\n    from pyspark.sql import DataFrame\n"
        "try:\n    import websockets\nexcept ImportError:\n    pass\n"
        "class Source:\n    import pyspark.sql\n",
    )
    bad = eager_optional_imports(tmp_path)
    assert [line.rsplit(": ", 1)[1] for line in bad] == ["websockets", "pyspark.sql"]


def test_line_cap_catches_a_long_module(tmp_path: Path) -> None:
    _write(tmp_path, "joins/long.py", "x = 1\n" * (MAX_LINES + 1))
    _write(tmp_path, "joins/short.py", "x = 1\n" * MAX_LINES)
    assert len(oversized_modules(tmp_path)) == 1


def test_private_reaches_are_found_across_modules_not_within_one(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "datalog/db.py",
        "from datalog.other import _helper\n"
        "class Database:\n    def __init__(self):\n        self._quiet = 0\n"
        "    def peek(self, other):\n        return other._quiet + self._quiet\n",
    )
    _write(tmp_path, "datalog/durable.py", "def log(db):\n    return db._quiet + db.__dict__\n")
    bad = private_reaches(tmp_path)
    assert bad == ["datalog/db.py:1: imports _helper", "datalog/durable.py:2: reaches ._quiet"]


def test_datalog_layering_catches_upward_imports_and_loose_modules(tmp_path: Path) -> None:
    _write(tmp_path, "datalog/loose.py", "x = 1\n")
    _write(
        tmp_path,
        "datalog/lang/parser.py",
        "from datalog.lang import ast\nfrom datalog.db.database import Database\n"
        "def later():\n    from joins import delta_query\n",
    )
    _write(tmp_path, "datalog/eval/rows.py", "from datalog import Database\n")
    _write(tmp_path, "datalog/cli/commands.py", "from datalog import Database\nimport datalog\n")
    bad = datalog_layer_violations(tmp_path)
    assert bad == [
        "datalog/loose.py: a module directly in datalog/ (put it in a package)",
        "datalog/lang/parser.py:2: datalog.db.database (datalog.lang may not import datalog.db)",
        "datalog/lang/parser.py:4: joins (datalog.lang may not import joins)",
        "datalog/eval/rows.py:1: datalog (datalog.eval may not import datalog.)",
    ]


def test_cycles_are_found_within_a_folder_through_lazy_and_type_imports(tmp_path: Path) -> None:
    _write(tmp_path, "joins/__init__.py", "")
    _write(tmp_path, "joins/a.py", "from joins.b import f\n")
    _write(
        tmp_path,
        "joins/b.py",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from joins import c\n",
    )
    _write(tmp_path, "joins/c.py", "def g():\n    from . import a\n")
    _write(tmp_path, "joins/d.py", "from joins.a import x\n")  # into the cycle, not in it
    _write(tmp_path, "joins/sub/e.py", "from joins.d import y\n")  # another folder
    _write(tmp_path, "joins/sub/__init__.py", "")
    _write(tmp_path, "joins/f.py", "from joins.sub.e import z\n")
    assert import_cycles(tmp_path, "joins") == [["joins/a.py", "joins/b.py", "joins/c.py"]]
