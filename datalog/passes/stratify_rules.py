"""Pass: order the rules into strata; negation or aggregation through recursion is an error.

Layer: datalog. Runs `datalog.strata.stratify` over the normalized rules.
"""

from __future__ import annotations

from datalog.passes.context import CheckContext
from datalog.strata import Stratum, stratify


def stratify_rules(ctx: CheckContext) -> tuple[Stratum, ...]:
    strata, errors = stratify(ctx.rules, ctx.program.source)
    ctx.errors.extend(errors)
    return strata
