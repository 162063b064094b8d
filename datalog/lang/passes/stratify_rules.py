"""Pass: order the rules into strata; negation or aggregation through recursion is an error.

Layer: datalog. Runs `datalog.lang.strata.stratify` over the normalized rules; a
subsumed relation gets a stratum even without rules (its facts are subsumed too).
"""

from __future__ import annotations

from datalog.lang.passes.context import CheckContext
from datalog.lang.strata import Stratum, stratify


def stratify_rules(ctx: CheckContext) -> tuple[Stratum, ...]:
    subsumed = {dominance.relation for dominance in ctx.dominances}
    strata, errors = stratify(ctx.rules, ctx.program.source, subsumed)
    ctx.errors.extend(errors)
    return strata
