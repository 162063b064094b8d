"""Program-analysis workloads: their programs and seeded generators of their facts.

Layer: bench — may import anything public from deltalog packages and peers.
- `cspa`: a context-sensitive points-to analysis in the style of Graspan's CSPA
  (`valueFlow`, `memoryAlias`, `valueAlias`, mutually recursive) over generated
  `assign` and `dereference` edges shaped like a program: variables grouped in
  functions, assignments mostly from earlier variables of the same function, calls
  passing values between functions, and a few pointers dereferenced. `hub=True`
  routes a share of the assignments through a few global variables, which makes
  large alias classes (the shape that is hard for a join-at-a-time engine).
- `crdt`: the list CRDT of Kleppmann's "Data structures as queries" talk, the `crdt`
  problem of frankmcsherry/dynamic-datalog, with its identifiers `[ctr, node]`
  flattened to two columns (Deltalog has no records); its input is a generated typing
  session: characters inserted mostly after the previous one, sometimes elsewhere,
  and some removed (an easy stand-in: short chains of blanks); `crdt_input_facts`
  reads a prefix of the problem's real input (`problems/crdt/input.zip` of that
  repository, kept out of this one), a real editing trace.
Both are written as Soufflé-compatible text with `.input`/`.printsize`, so the same
program and fact files run in Deltalog, `deltalog run` and Soufflé.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np

__all__ = ["CRDT", "CSPA", "crdt_facts", "crdt_input_facts", "cspa_facts", "write_facts"]

CSPA = """
.decl assign(a: number, b: number)
.decl dereference(a: number, b: number)
.input assign
.input dereference
.decl valueFlow(a: number, b: number)
.decl memoryAlias(a: number, b: number)
.decl valueAlias(a: number, b: number)
valueFlow(y, x) :- assign(y, x).
valueFlow(x, y) :- assign(x, z), memoryAlias(z, y).
valueFlow(x, y) :- valueFlow(x, z), valueFlow(z, y).
memoryAlias(x, w) :- dereference(y, x), valueAlias(y, z), dereference(z, w).
valueAlias(x, y) :- valueFlow(z, x), valueFlow(z, y).
valueAlias(x, y) :- valueFlow(z, x), memoryAlias(z, w), valueFlow(w, y).
valueFlow(x, x) :- assign(x, _).
valueFlow(x, x) :- assign(_, x).
memoryAlias(x, x) :- assign(_, x).
memoryAlias(x, x) :- assign(x, _).
.printsize valueFlow
.printsize memoryAlias
.printsize valueAlias
"""

# Identifiers are (counter, node) pairs, compared lexicographically: `later(a, b)`
# below is written out as the disjunction the original program uses.
CRDT = """
.decl insert(c: number, n: number, pc: number, pn: number)
.decl remove(c: number, n: number)
.input insert
.input remove
.decl assign(ic: number, in: number, ec: number, en: number, v: symbol)
assign(c, n, c, n, "hi") :- insert(c, n, _, _).
.decl hasChild(pc: number, pn: number)
hasChild(pc, pn) :- insert(_, _, pc, pn).
.decl laterChild(pc: number, pn: number, c2: number, n2: number)
laterChild(pc, pn, c2, n2) :- insert(c1, n1, pc, pn), insert(c2, n2, pc, pn),
  (c1 > c2 ; c1 = c2, n1 > n2).
.decl firstChild(pc: number, pn: number, c: number, n: number)
firstChild(pc, pn, c, n) :- insert(c, n, pc, pn), !laterChild(pc, pn, c, n).
.decl sibling(c1: number, n1: number, c2: number, n2: number)
sibling(c1, n1, c2, n2) :- insert(c1, n1, pc, pn), insert(c2, n2, pc, pn).
.decl laterSibling(c1: number, n1: number, c2: number, n2: number)
laterSibling(c1, n1, c2, n2) :- sibling(c1, n1, c2, n2), (c1 > c2 ; c1 = c2, n1 > n2).
.decl laterSibling2(c1: number, n1: number, c3: number, n3: number)
laterSibling2(c1, n1, c3, n3) :- sibling(c1, n1, c2, n2), sibling(c1, n1, c3, n3),
  (c1 > c2 ; c1 = c2, n1 > n2), (c2 > c3 ; c2 = c3, n2 > n3).
.decl nextSibling(c1: number, n1: number, c2: number, n2: number)
nextSibling(c1, n1, c2, n2) :- laterSibling(c1, n1, c2, n2), !laterSibling2(c1, n1, c2, n2).
.decl hasNextSibling(c: number, n: number)
hasNextSibling(c, n) :- laterSibling(c, n, _, _).
.decl nextSiblingAnc(sc: number, sn: number, nc: number, nn: number)
nextSiblingAnc(sc, sn, nc, nn) :- nextSibling(sc, sn, nc, nn).
nextSiblingAnc(sc, sn, nc, nn) :- !hasNextSibling(sc, sn), insert(sc, sn, pc, pn),
  nextSiblingAnc(pc, pn, nc, nn).
.decl nextElem(pc: number, pn: number, nc: number, nn: number)
nextElem(pc, pn, nc, nn) :- firstChild(pc, pn, nc, nn).
nextElem(pc, pn, nc, nn) :- !hasChild(pc, pn), nextSiblingAnc(pc, pn, nc, nn).
.decl currentValue(ec: number, en: number, v: symbol)
currentValue(ec, en, v) :- assign(ic, in, ec, en, v), !remove(ic, in).
.decl hasValue(ec: number, en: number)
hasValue(ec, en) :- currentValue(ec, en, _).
.decl skipBlank(fc: number, fn: number, tc: number, tn: number)
skipBlank(fc, fn, tc, tn) :- nextElem(fc, fn, tc, tn).
skipBlank(fc, fn, tc, tn) :- skipBlank(vc, vn, tc, tn), nextElem(fc, fn, vc, vn),
  !hasValue(vc, vn).
.decl nextVisible(pc: number, pn: number, nc: number, nn: number)
nextVisible(pc, pn, nc, nn) :- hasValue(pc, pn), skipBlank(pc, pn, nc, nn), hasValue(nc, nn).
.decl result(c1: number, c2: number, v: symbol)
result(c1, c2, v) :- nextVisible(c1, _, c2, n2), currentValue(c2, n2, v).
.printsize result
.printsize nextElem
"""

Facts = dict[str, np.ndarray]  # relation -> (rows, columns) int64


def cspa_facts(variables: int, seed: int = 0, hub: bool = False) -> Facts:
    """`assign` and `dereference` of a program with `variables` variables (see module).

    Functions of 16 variables; each variable is assigned from one or two of the four
    variables before it in its function. A fifth of the functions call others: each
    of their last variables passes a value to a parameter (a first variable) of a
    leaf function, which calls nothing, so values flow at most one call deep and the
    analysis stays about linear in `variables`."""
    rng = np.random.default_rng(seed)
    size = 16  # variables per function
    n = variables - variables % size
    x = rng.integers(0, n, int(1.5 * n))
    y = x - np.minimum(rng.integers(1, 5, len(x)), x % size)
    local = x != y
    functions = n // size
    callers = rng.choice(functions, functions // 5, replace=False)
    leaves = np.setdiff1d(np.arange(functions), callers)
    calls = len(callers) * 2
    last = size - 1 - rng.integers(0, 4, calls)
    caller = callers[rng.integers(0, len(callers), calls)] * size + last
    callee = leaves[rng.integers(0, len(leaves), calls)] * size + rng.integers(0, 2, calls)
    parts = [np.stack([x[local], y[local]], 1), np.stack([callee, caller], 1)]
    if hub:  # a few globals written in callers and read in leaves
        globals_ = rng.integers(0, n, 4)
        k = max(1, n // 2000)
        g = globals_[rng.integers(0, len(globals_), k)]
        writers = callers[rng.integers(0, len(callers), k)] * size + rng.integers(0, size, k)
        readers = leaves[rng.integers(0, len(leaves), k)] * size + rng.integers(0, size, k)
        parts += [np.stack([g, writers], 1), np.stack([readers, g], 1)]
    assign = _distinct(np.concatenate(parts))
    # *p: a tenth of the variables point to one of the variables before them
    pointers = rng.choice(n, n // 10, replace=False)
    target = pointers - np.minimum(rng.integers(1, 5, len(pointers)), pointers % size)
    dereference = _distinct(np.stack([pointers, target], 1))
    return {"assign": assign, "dereference": dereference}


def crdt_facts(operations: int, seed: int = 0) -> Facts:
    """A typing session of `operations` inserts: each character's parent is the one
    typed before it, or, one time in twenty, a random earlier one (the cursor moved);
    three replicas (`node`) type in turns. About a fifth of the characters are then
    removed, in runs of consecutive ones (text deleted a word or a line at a time,
    which makes long runs of blanks for `skipBlank` to cross)."""
    rng = np.random.default_rng(seed)
    nodes = 3
    counters = np.arange(1, operations + 1)
    node = rng.integers(0, nodes, operations)
    jump = rng.random(operations) < 0.05
    parent = np.where(jump, (rng.random(operations) * counters).astype(np.int64), counters - 1)
    parent_node = np.where(parent == 0, 0, node[np.maximum(parent - 1, 0)])
    insert = np.stack([counters, node, parent, parent_node], 1)
    runs = max(1, operations // 60)
    starts = rng.integers(0, operations, runs)
    lengths = np.minimum(rng.geometric(1 / 12, runs), 200)
    gone = np.zeros(operations, dtype=bool)
    for start, length in zip(starts.tolist(), lengths.tolist(), strict=True):
        gone[start : start + length] = True
    removed = np.flatnonzero(gone)
    remove = np.stack([counters[removed], node[removed]], 1)
    return {"insert": insert, "remove": remove}


def crdt_input_facts(source: Path, operations: int) -> Facts:
    """The real input of dynamic-datalog's `crdt` problem (`problems/crdt/input.zip` of
    github.com/frankmcsherry/dynamic-datalog; `source`: that zip, or a directory
    holding it or its `insert.txt` and `remove.txt`, space-separated `ctr node
    parent_ctr parent_node` and `ctr node`): its first `operations` inserts and the
    removes of their identifiers."""
    insert_text, remove_text = _crdt_texts(source)
    inserts = np.loadtxt(io.StringIO(insert_text), dtype=np.int64, ndmin=2, max_rows=operations)
    removes = np.loadtxt(io.StringIO(remove_text), dtype=np.int64, ndmin=2)
    ids = inserts[:, 0] * (1 << 32) + inserts[:, 1]
    kept = np.isin(removes[:, 0] * (1 << 32) + removes[:, 1], ids)
    return {"insert": inserts, "remove": removes[kept]}


def _crdt_texts(source: Path) -> tuple[str, str]:
    """The texts of `insert.txt` and `remove.txt` in `source` (a zip or a directory)."""
    if source.is_dir():
        for candidate in (source, source / "input"):
            if (candidate / "insert.txt").exists():
                return tuple(  # type: ignore[return-value]
                    (candidate / f"{name}.txt").read_text(encoding="ascii")
                    for name in ("insert", "remove")
                )
        source = source / "input.zip"
    with zipfile.ZipFile(source) as archive:
        names = {Path(n).name: n for n in archive.namelist()}
        return tuple(  # type: ignore[return-value]
            archive.read(names[f"{name}.txt"]).decode("ascii") for name in ("insert", "remove")
        )


def write_facts(facts: Facts, directory: Path) -> None:
    """`directory/r.facts` for every relation, tab-separated (Soufflé's `-F` layout)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, rows in facts.items():
        np.savetxt(directory / f"{name}.facts", rows, fmt="%d", delimiter="\t")


def _distinct(rows: np.ndarray) -> np.ndarray:
    return np.unique(rows.astype(np.int64), axis=0)
