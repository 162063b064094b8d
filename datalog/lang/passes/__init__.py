"""The checker's passes over the AST, one function per module (sqlglot style).

Layer: datalog. May import the datalog language modules (ast, errors, schema,
functions, strata); never `differential`, `joins` or `server`. The passes run in
the order listed by `datalog.lang.checks.PASSES`; each appends what it finds to a
`CheckContext` so that all errors of a program are reported together. Before
them, `instantiate_components` (with `check_components` and `component_scopes`)
expands Soufflé components into a plain program.
"""
