"""The planner: checked Datalog to differential dataflows.

Layer: datalog.plan, above `datalog.lang` and `datalog.eval` (it may import those,
`differential` and `joins`); below `datalog.db`. Never `server`.

`planner.Planner` is the one way to plan: it runs the named passes of `passes`
(magic sets, normalize, sharing, strata) over a `plan.Plan` (frozen dataclasses:
the plan as data, docs/adr/0051) and `build.Lowering` lowers the result to
operators. `sources` gives every relation its collection and its arrangements in
each scope (shared arrangements for base relations); `body` compiles one rule body
into joins, filters, antijoins and reduces, with `aggregates`, `atoms` and `wcoj`
(delta queries) behind the `binding.Compiler` protocol, recording each step in the
plan; `magic` and `demand` specialize a program to a query's constants; `views`
shares derived relations; `explain` and `dot` print the plan.
"""
