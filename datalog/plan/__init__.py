"""The planner: checked Datalog to differential dataflows.

Layer: datalog.plan, above `datalog.lang` and `datalog.eval` (it may import those,
`differential` and `joins`); below `datalog.db`. Never `server`.

`build.build_query` synthesizes one dataflow for a query from the strata the
query depends on; `sources` gives every relation its collection and its
arrangements in each scope (shared arrangements for base relations);
`body` compiles one rule body into joins, filters, antijoins and reduces, with
`aggregates`, `atoms` and `wcoj` (delta queries) behind the `binding.Compiler`
protocol; `magic` and `demand` specialize a program to a query's constants; `views`
shares derived relations; `explain` and `dot` print what was built.
"""
