"""`Database.explain` as text, printed from the plan (`datalog.plan.plan.Plan`):
what the passes decided, the engine hints accepted, the shared arrangements read and
the operators built; and the dump of the plan after each pass (`passes=True`).

Layer: datalog.plan. Imports the plan's values, the AST and its printer.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from datalog.lang.ast import Pragma
from datalog.lang.pretty import format_rule
from datalog.plan.plan import Aggregate, BodyPlan, Plan, Step, StratumPlan

SPECIALIZED = {
    "query": "specialized to the query's constants (magic sets)",
    "tenant": "specialized to the parameter relation (magic sets)",
}


def explain_text(plan: Plan, served: Sequence[str], pragmas: Sequence[Pragma]) -> str:
    """The explanation of the lowered `plan`; `served` says which shared dataflow
    serves it live, if one does."""
    lines = [f"query {plan.name}", f"answer columns: {', '.join(plan.answer_vars)}"]
    lines += [f"  {n}" for n in plan_notes(plan)] + list(served)
    lines += [
        f"  pragma {p.key!r}{f' = {p.value!r}' if p.value else ''}: an engine hint, "
        "accepted; it changes no answer here (delta queries, magic sets and "
        "arrangements are chosen per query)"
        for p in pragmas
    ]
    shared = [read.show() for read in plan.shared]
    lines.append("shared arrangements: " + (", ".join(shared) or "none"))
    lines.append("dataflow (the operators built, stateful ones):")
    lines += [f"  {line}" for line in plan.operators]
    return "\n".join(lines)


def plan_notes(plan: Plan) -> list[str]:
    """What the passes and the lowering decided, in the order they decided it."""
    lines: list[str] = []
    if plan.specialized is not None:
        lines.append(SPECIALIZED[plan.specialized.to])
        lines += [f"  {note}" for note in plan.specialized.notes]
    for read in sorted(plan.views, key=lambda r: r.relation):
        lines.append(f"derived relation {read.relation}: read from the shared view `{read.view}`")
        lines += [f"  {note}" for note in read.notes]
    for stratum in plan.strata:
        lines += _stratum(stratum)
    for body in plan.bodies:
        lines += _body(f"query body: {body.title}", body)
    return lines


def _stratum(stratum: StratumPlan) -> list[str]:
    lines = []
    if stratum.recursive:
        lines.append(f"recursive stratum {list(stratum.relations)}: one iteration scope")
    for relation in stratum.lowered:
        for rule in relation.rules:
            lines += _body(f"rule {rule.title}", rule)
        lines += _steps(relation.finish)
    return lines


def _body(title: str, body: BodyPlan) -> list[str]:
    return [title, *_steps(body.steps)]


def _steps(steps: Sequence[Step]) -> list[str]:
    return [line for step in steps for line in step.lines()]


# -- the dump after each pass ----------------------------------------------------------


def explain_passes(stages: Sequence[Plan], served: Sequence[str], pragmas: Sequence[Pragma]) -> str:
    """The plan after each pass, in order (Soufflé's `--show=transformed-ast`): what
    that pass decided; after lowering, the whole explanation."""
    lines = []
    for number, stage in enumerate(stages, 1):
        name = stage.passes[-1]
        lines.append(f"-- after pass {number}: {name} --")
        if name == "lowering":
            lines.append(explain_text(stage, served, pragmas))
        else:
            lines += DUMPS[name](stage)
    return "\n".join(lines)


def _magic(plan: Plan) -> list[str]:
    if plan.specialized is None:
        how = "off" if plan.options.magic == "off" else "no constant to push"
        return [f"not specialized ({how})"]
    lines = [SPECIALIZED[plan.specialized.to]]
    lines += [f"  {note}" for note in plan.specialized.notes]
    copies = [name for name in plan.program.schema.relations if "@" in name]
    return lines + _rules(plan, copies)  # the adorned copies' and magic relations' rules


def _normalize(plan: Plan) -> list[str]:
    lines = [f"reads: {', '.join(sorted(plan.reads)) or 'nothing'}"]
    if plan.query is not None:
        lines.append("query: " + " | ".join(body.title for body in _query_bodies(plan)))
    return lines


def _sharing(plan: Plan) -> list[str]:
    lines = []
    for read in sorted(plan.views, key=lambda r: r.relation):
        source = f"the shared view `{read.view}`" if read.view else "a view made for it"
        lines.append(f"derived relation {read.relation}: read from {source}")
    if plan.options.share == "off":
        lines.append("sharing off: every derived relation is computed here")
    derived = {rule.head.name for rule in plan.program.rules}
    computed = sorted(plan.computed & derived)
    return [*lines, f"derived relations computed here: {', '.join(computed) or 'none'}"]


def _strata(plan: Plan) -> list[str]:
    lines = []
    for stratum in plan.strata:
        how = ", recursive: one iteration scope" if stratum.recursive else ""
        lines.append(f"stratum {list(stratum.relations)}{how}")
        lines += [f"  {line}" for line in _rules(plan, stratum.relations)]
    return lines or ["no stratum: the answer reads base relations and views only"]


def _choose_join(plan: Plan) -> list[str]:
    return _each_body(plan, lambda body: body.choice.lines() if body.choice else [])


def _order_joins(plan: Plan) -> list[str]:
    return _each_body(plan, lambda body: _ordered(body.order))


def _each_body(plan: Plan, show: Callable[[BodyPlan], list[str]]) -> list[str]:
    """`show` of every body the plan computes: the strata's rules, the query's bodies."""
    lines = []
    for stratum in plan.strata:
        for relation in stratum.lowered:
            for rule in relation.rules:
                lines += [f"rule {rule.title}", *(f"  {line}" for line in show(rule))]
    for body in plan.bodies:
        lines += [f"query body: {body.title}", *(f"  {line}" for line in show(body))]
    return lines


def _ordered(steps: Sequence[Step], depth: int = 0) -> list[str]:
    """The steps in order; an aggregate's body's steps indented under it."""
    lines = []
    for step in steps:
        lines += ["  " * depth + line for line in step.lines()]
        if isinstance(step, Aggregate):
            lines += _ordered(step.inner, depth + 1)
    return lines


def _rules(plan: Plan, relations: Collection[str]) -> list[str]:
    names = set(relations)
    return [f"rule {format_rule(r)}" for r in plan.program.rules if r.head.name in names]


def _query_bodies(plan: Plan) -> list[BodyPlan]:
    assert plan.query is not None
    return [BodyPlan(body) for body in plan.query.bodies]


DUMPS = {
    "magic sets": _magic,
    "normalize": _normalize,
    "sharing": _sharing,
    "strata": _strata,
    "choose join": _choose_join,
    "order joins": _order_joins,
}
