"""The language: Datalog text to a checked program (grammar, parser, AST, checker).

Layer: datalog.lang, the bottom of `datalog`. Imports no other `datalog` package;
of the project only `differential.dataflow` (the budget a long parse checks).
`parser` turns text into the AST of `ast`; `checks` runs the passes of `passes/`
(one job a module, in the style of sqlglot) and returns a `CheckedProgram` with
its `schema` and `strata`. `functions` is the language's table of built-ins:
their signatures (the checker's) and their meaning on one value (every evaluator's).
"""
