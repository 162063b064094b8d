"""A plan's dataflow as a Graphviz DOT graph: `Database.explain(text, format="dot")`.

Layer: datalog.plan. Imports `differential` and `joins` (to name operators) and the
plan's values. `graph_of` reads a built dataflow into the plan's `Graph` (lowering
calls it when `explain` asks); `render_dot` prints that value, nothing else.

Nodes are the stateful operators that were built (arrangements, joins, reduces,
delta queries, imports); the stateless steps between them (maps, filters,
concats, enter and leave) are folded into the edges, which follow each operator's
`inputs()` back through `Stream.upstream` to the operators that produce them. An
iteration scope is a cluster; a variable's feedback is a dashed edge that goes
back up. Imports of the engine's shared arrangements are marked (filled
cylinders, with how many other live queries read them); the answer is a note.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from datalog.lang.errors import UnsupportedError
from datalog.plan.plan import Graph, Node, Plan
from differential.dataflow import Operator, Scope, Stream
from differential.graph import Dataflow
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


def explain_graph(format: str, plan: Plan) -> str:
    """`plan`'s graph in `format` ("dot" is the one graph format); `UnsupportedError` else."""
    if format != "dot":
        raise UnsupportedError(f"unknown explain format {format!r}: use 'text' or 'dot'")
    assert plan.graph is not None, "explain draws a lowered plan"
    return render_dot(plan.name, plan.graph, plan.answer_vars)


def render_dot(title: str, graph: Graph, answer_columns: Sequence[str]) -> str:
    """`graph` (a built dataflow's, `graph_of`) as a DOT digraph named `title`."""
    lines = [f"digraph {_quote(title)} {{", f"  graph [{_STYLE['graph']}, label={_quote(title)}];"]
    lines += [f"  {kind} [{_STYLE[kind]}];" for kind in ("node", "edge")]
    lines += _nodes(graph.nodes, "  ")
    for source, target, feedback in graph.edges:
        style = ' [style=dashed, label="feedback", constraint=false]' if feedback else ""
        lines.append(f"  n{source} -> n{target}{style};")
    for index, sources in enumerate(graph.answers):
        label = f"answer ({', '.join(answer_columns)})" if answer_columns else "answer"
        lines.append(f"  answer{index} [{_ANSWER}, label={_quote(label)}];")
        lines += [f"  n{source} -> answer{index};" for source in sources]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _nodes(nodes: Sequence[Node], indent: str) -> list[str]:
    """One DOT node per operator; a nested scope becomes a cluster."""
    lines = []
    for node in nodes:
        if node.kind == "scope":
            lines.append(f"{indent}subgraph cluster_{node.id} {{")
            lines.append(f'{indent}  label={_quote(node.label)}; style="dashed,rounded";')
            lines += _nodes(node.children, indent + "  ")
            lines.append(f"{indent}}}")
        elif node.kind == "shared":
            lines.append(f"{indent}n{node.id} [{_SHARED}, label={_quote(node.label)}];")
        else:
            lines.append(f"{indent}n{node.id} [label={_quote(node.label)}];")
    return lines


def graph_of(dataflow: Dataflow) -> Graph:
    """The stateful operators of `dataflow` (built, not necessarily running), what
    each reads and what its outputs are computed from."""
    order = {op: n for n, op in enumerate(dataflow.root.all_operators())}
    edges = tuple(
        (order[source], n, order[source] >= n)  # against the run order: a feedback
        for op, n in order.items()
        for source in _sources(op)
    )
    answers = tuple(
        tuple(order[s] for s in _producers(output.capture.stream))
        for output in dataflow.outputs.values()
    )
    imports = [op for op in order if isinstance(op, ImportOp) and not op.handle.released]
    own = Counter(id(op.shared) for op in imports)  # readers that are this dataflow
    return Graph(_scope_nodes(dataflow.root, order, own), edges, answers)


def _scope_nodes(scope: Scope, order: dict[Operator, int], own: Counter[int]) -> tuple[Node, ...]:
    nodes = []
    for op in scope.operators:
        if isinstance(op, Subscope):
            inner = _scope_nodes(op.inner, order, own)
            nodes.append(Node(order[op], op.name, "scope", inner))
        elif isinstance(op, ImportOp):
            others = op.shared.readers - own[id(op.shared)]
            nodes.append(Node(order[op], _shared_label(op, others), "shared"))
        else:
            nodes.append(Node(order[op], _label(op)))
    return tuple(nodes)


def _label(op: Operator) -> str:
    if isinstance(op, ArrangeOp):
        return f"arrange\nkey {op.key_arity} of {len(op.dtypes)}"
    if isinstance(op, DeltaQueryOp):
        bindings = [p.show() for p in op.patterns] + [c.show() for c in op.constants]
        return "delta query (worst-case optimal)\n" + "\n".join(bindings)
    return op.name.replace("_", " ")


def _shared_label(op: ImportOp, others: int) -> str:
    """`edge by [0]`, as the text explain names shared arrangements (the shared
    arrangement's name is `input[permutation]/key arity`; a view's input name
    holds brackets of its own: `reach [view]`)."""
    name, _, rest = op.shared.name.rpartition("[")
    permutation = [int(c) for c in rest.partition("]")[0].split(",") if c.strip()]
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
