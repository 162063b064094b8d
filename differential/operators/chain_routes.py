"""Compiled routes: a relation's ways through maps and join stages as one function.

Layer: differential (operators). Imports the join stage and the linear row forms.

Fused rounds (`chain`, ADR 0029/0046) send each round's new rows along every path of
their relation: maps and filters (row forms), maybe a join with an unchanging side
(`JoinStage`), then on along each of the join's ways. Walking those paths generically
(`chain._route`, `chain._through`) costs a few Python calls per row and stage; in a
chain of one row per round (Soufflé's `independent_body3`) that bookkeeping is most
of a round (ADR 0061). `compile_route` writes the walk of one relation's paths out
as the source of one function, once per chain: each map a call of its row form, each
join stage its recording, its lookup of matches under the row's key and its
projection, inline, with the same images in the same order as the generic walk.

The source holds only generated names (bound to the row forms, the stages' lists,
match tables, lookups and projections in the function's globals) and integer
literals: never user text. A chain compiles its routes once its run has handed over
once (`TUNING.handover` new keys): short runs, such as a small commit's, never pay
for compiling.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from differential.operators.chain_joins import JoinStage
from differential.operators.linear import Row

Route = Callable[[list[Row], list[list[Row]], int], int]


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.env: dict[str, object] = {"__builtins__": {"len": len}}
        self.names: dict[int, str] = {}
        self.fresh = 0

    def bind(self, value: object, prefix: str) -> str:
        """A global name for `value` (one per object)."""
        name = self.names.get(id(value))
        if name is None:
            name = self.names[id(value)] = f"{prefix}{len(self.names)}"
            self.env[name] = value
        return name

    def var(self) -> str:
        self.fresh += 1
        return f"v{self.fresh}"

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)


def compile_route(paths: Sequence[tuple[Sequence[object], int]]) -> Route:
    """One function sending rows along `paths` (a relation's: maps, maybe ending in a
    join stage, each with its target relation or -1) into `images`, the rows a join
    stage receives recorded at iteration `now`; it returns how many rows arrived."""
    writer = _Writer()
    writer.line(0, "def route(rows, images, now):")
    writer.line(1, "count = 0")
    for path, target in paths:
        _path(writer, list(path), target, "rows", 1)
    writer.line(1, "return count")
    source = "\n".join(writer.lines) + "\n"
    exec(compile(source, "<fused route>", "exec"), writer.env)  # (generated: no user text)
    route: Route = writer.env["route"]  # type: ignore[assignment]
    return route


def _path(writer: _Writer, path: list[object], target: int, rows: str, depth: int) -> None:
    """Source sending the list `rows` along `path` (depth: its indentation)."""
    join = path[-1] if path and isinstance(path[-1], JoinStage) else None
    maps = path[:-1] if join is not None else path
    for stage in maps:  # each map or filter: one comprehension (None drops a row)
        name, out = writer.bind(stage, "m"), writer.var()
        writer.line(depth, f"{out} = [x for r in {rows} if (x := {name}(r)) is not None]")
        rows = out
    if join is None:
        writer.line(depth, f"count += len({rows})")
        writer.line(depth, f"images[{target}].extend({rows})")
        return
    _join(writer, join, rows, depth)


def _join(writer: _Writer, join: JoinStage, rows: str, depth: int) -> None:
    """Source passing `rows` through a join stage (as `JoinStage.join_rows`) and on."""
    recorded = writer.bind(join.rows, "jr")
    iterations = writer.bind(join.iterations, "ji")
    matches = writer.bind(join.matches, "jm")
    lookup = writer.bind(join.lookup, "jl")
    project = writer.bind(join.project, "jp")
    k, out = join.k, writer.var()
    writer.line(depth, f"if {rows}:")
    writer.line(depth + 1, f"{recorded}.extend({rows})")
    writer.line(depth + 1, f"{iterations}.extend([now] * len({rows}))")
    writer.line(depth, f"{out} = []")
    writer.line(depth, f"for r in {rows}:")
    writer.line(depth + 1, f"key = r[:{k}]")
    writer.line(depth + 1, f"found = {matches}.get(key)")
    writer.line(depth + 1, "if found is None:")
    writer.line(depth + 2, f"found = {matches}[key] = {lookup}(key)")
    joined = "(*r, *values)" if join.dynamic_left else f"(*key, *values, *r[{k}:])"
    writer.line(depth + 1, "for values in found:")
    writer.line(depth + 2, f"{out}.append({project}({joined}))")
    for onward, to in join.onward:
        _path(writer, list(onward), to, out, depth)
