"""`Database.explain` as text: what the planner did, the engine hints accepted, the
shared arrangements read and the operators built.

Layer: datalog (API). Imports the planner's `QueryPlan` and the AST.
"""

from __future__ import annotations

from collections.abc import Sequence

from datalog.lang.ast import Pragma
from datalog.plan.build import QueryPlan


def explain_text(
    key: str,
    answer_vars: Sequence[str],
    built: QueryPlan,
    served: Sequence[str],
    pragmas: Sequence[Pragma],
) -> str:
    """The explanation of query `key` planned as `built`; `served` says which shared
    dataflow serves it live, if one does."""
    lines = [f"query {key}", f"answer columns: {', '.join(answer_vars)}"]
    lines += [f"  {n}" for n in built.notes] + list(served)
    lines += [
        f"  pragma {p.key!r}{f' = {p.value!r}' if p.value else ''}: an engine hint, "
        "accepted; it changes no answer here (delta queries, magic sets and "
        "arrangements are chosen per query)"
        for p in pragmas
    ]
    lines.append("shared arrangements: " + (", ".join(built.shared) or "none"))
    lines.append("dataflow (the operators built, stateful ones):")
    lines += [f"  {line}" for line in built.dataflow.describe()]
    return "\n".join(lines)
