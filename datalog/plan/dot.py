"""A built dataflow as a Graphviz DOT graph: `Database.explain(text, format="dot")`.

Layer: datalog. Imports `differential` and `joins` (to name operators), nothing else.

Nodes are the stateful operators that were built (arrangements, joins, reduces,
delta queries, imports); the stateless steps between them (maps, filters,
concats, enter and leave) are folded into the edges, which follow each operator's
`inputs()` back through `Stream.upstream` to the operators that produce them. An
iteration scope is a cluster; a variable's feedback is a dashed edge that goes
back up. Imports of the engine's shared arrangements are marked (filled
cylinders, with how many other live queries read them); the answer is a note.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from datalog.lang.errors import UnsupportedError
from differential.dataflow import Operator, Scope, Stream
from differential.engine import Dataflow
from differential.operators.arrange import ArrangeOp
from differential.operators.iterate import Subscope
from differential.operators.shared import ImportOp
from joins.delta_query import DeltaQueryOp

_STYLE = {
    "graph": 'rankdir=TB, fontname="Helvetica", fontsize=11, labelloc=t',
    "node": 'shape=box, style=rounded, fontname="Helvetica", fontsize=10',
    "edge": 'fontname="Helvetica", fontsize=9, color="#555555"',
}
_SHARED = 'shape=cylinder, style=filled, fillcolor="#cfe3ff"'
_ANSWER = 'shape=note, style=filled, fillcolor="#fff2cc"'


def explain_graph(
    format: str, title: str, dataflow: Dataflow, answer_columns: Sequence[str]
) -> str:
    """`dataflow` in `format` ("dot" is the one graph format); `UnsupportedError` else."""
    if format != "dot":
        raise UnsupportedError(f"unknown explain format {format!r}: use 'text' or 'dot'")
    return dataflow_dot(title, dataflow, answer_columns)


def dataflow_dot(title: str, dataflow: Dataflow, answer_columns: Sequence[str]) -> str:
    """`dataflow` (built, not necessarily running) as a DOT digraph named `title`."""
    order = {op: n for n, op in enumerate(dataflow.root.all_operators())}
    lines = [f"digraph {_quote(title)} {{", f"  graph [{_STYLE['graph']}, label={_quote(title)}];"]
    lines += [f"  {kind} [{_STYLE[kind]}];" for kind in ("node", "edge")]
    lines += _scope_nodes(dataflow.root, order, "  ")
    for op, n in order.items():
        for source in _sources(op):
            feedback = order[source] >= n  # against the run order: a variable's feedback
            style = ' [style=dashed, label="feedback", constraint=false]' if feedback else ""
            lines.append(f"  n{order[source]} -> n{n}{style};")
    for index, output in enumerate(dataflow.outputs.values()):
        label = f"answer ({', '.join(answer_columns)})" if answer_columns else "answer"
        lines.append(f"  answer{index} [{_ANSWER}, label={_quote(label)}];")
        for source in _producers(output.capture.stream):
            lines.append(f"  n{order[source]} -> answer{index};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _scope_nodes(scope: Scope, order: dict[Operator, int], indent: str) -> list[str]:
    """One node per operator of `scope`; a nested scope becomes a cluster."""
    lines = []
    for op in scope.operators:
        if isinstance(op, Subscope):
            lines.append(f"{indent}subgraph cluster_{order[op]} {{")
            lines.append(f'{indent}  label={_quote(op.name)}; style="dashed,rounded";')
            lines += _scope_nodes(op.inner, order, indent + "  ")
            lines.append(f"{indent}}}")
        elif isinstance(op, ImportOp):
            lines.append(f"{indent}n{order[op]} [{_SHARED}, label={_quote(_shared_label(op))}];")
        else:
            lines.append(f"{indent}n{order[op]} [label={_quote(_label(op))}];")
    return lines


def _label(op: Operator) -> str:
    if isinstance(op, ArrangeOp):
        return f"arrange\nkey {op.key_arity} of {len(op.dtypes)}"
    if isinstance(op, DeltaQueryOp):
        bindings = [p.show() for p in op.patterns] + [c.show() for c in op.constants]
        return "delta query (worst-case optimal)\n" + "\n".join(bindings)
    return op.name.replace("_", " ")


def _shared_label(op: ImportOp) -> str:
    """`edge by [0]`, as the text explain names shared arrangements."""
    name, _, rest = op.shared.name.partition("[")
    permutation = [int(c) for c in rest.partition("]")[0].split(",") if c.strip()]
    others = op.shared.readers - (0 if op.handle.released else 1)
    readers = f", read by {others} other {'query' if others == 1 else 'queries'}" if others else ""
    return f"{name} by {permutation[: op.key_arity]}\nshared arrangement{readers}"


def _sources(op: Operator) -> Iterator[Operator]:
    """The operators whose output `op` reads, each once."""
    found: dict[Operator, None] = {}
    for source in op.inputs():
        if isinstance(source, Stream):
            found.update(dict.fromkeys(_producers(source)))
        else:
            found[source] = None
    return iter(found)


def _producers(stream: Stream) -> list[Operator]:
    """The stateful operators `stream` is computed from through stateless steps."""
    found: dict[Operator, None] = {}
    seen: set[int] = set()
    pending = [stream]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if current.producer is not None:
            found[current.producer] = None
        else:
            pending.extend(reversed(current.upstream))
    return list(found)


def _quote(text: str) -> str:
    """A DOT string: backslashes and quotes escaped, newlines as centred line breaks."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\r", "").replace("\n", "\\n") + '"'
