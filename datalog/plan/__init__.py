"""The planner: checked Datalog to differential dataflows.

Layer: datalog. May import `differential` (and `joins`), and the datalog
language modules; never `server`.

`build.build_query` synthesizes one dataflow for a query from the strata the
query depends on; `sources` gives every relation its collection and its
arrangements in each scope (shared arrangements for base relations);
`body` compiles one rule body into joins, filters, antijoins and reduces.
"""
