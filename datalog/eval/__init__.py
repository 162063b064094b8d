"""Evaluation: what terms, functors and rules mean, over columns and over rows.

Layer: datalog.eval, above `datalog.lang` (it may import only that of `datalog`)
and below the planner. `expressions` evaluates terms on whole numpy columns;
`row_terms` compiles them to functions of one Python row; `symbols` interns
strings; `rows` turns user data into typed columns and back; `functors` binds
`.functor` declarations to Python; `reference` is the naive oracle every engine
answer is compared with, and `heights` the proof heights behind `Database.why`.
"""
