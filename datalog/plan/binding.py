"""What a rule body compiles to, and what the body's helpers ask of its compiler.

Layer: datalog.plan. Imports the language's types and `differential`'s streams.

`Binding` is a compiled (partial) body: a stream whose column i holds variable
`vars[i]`. `Compiler` is the part of `datalog.plan.body.BodyCompiler` that the
helpers it drives (`aggregates`, `atoms`, `wcoj`) call back into; they depend on
this protocol, not on `body`, so the planner's modules import each other in one
direction only (ADR 0048).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from differential.dataflow import Stream

if TYPE_CHECKING:
    from datalog.eval.symbols import SymbolTable
    from datalog.lang.ast import ColumnType, Term
    from datalog.plan.plan import Step
    from datalog.plan.sources import Sources
    from differential.operators.arrange import Arranged


@dataclass(frozen=True)
class Binding:
    """`stream`'s column i holds the value of variable `vars[i]`."""

    stream: Stream
    vars: tuple[str, ...]

    def index(self, name: str) -> int:
        return self.vars.index(name)


class Compiler(Protocol):
    """A body compiler, as the aggregation, atom and delta-query helpers use it."""

    @property
    def sources(self) -> Sources: ...

    @property
    def types(self) -> dict[str, ColumnType]: ...

    @property
    def symbols(self) -> SymbolTable: ...

    @property
    def steps(self) -> list[Step]: ...

    def compile(self, order: Sequence[Step], start: Binding | None = None) -> Binding: ...

    def bind(self, binding: Binding, name: str, expr: Term) -> Binding: ...

    def distinct(self, binding: Binding) -> Binding: ...

    def arrange(self, binding: Binding, key: Sequence[str]) -> tuple[Arranged, list[str]]: ...

    def antijoin_binding(self, binding: Binding, negated: Binding) -> Binding: ...
