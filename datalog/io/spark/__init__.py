"""Scale-out evaluation of a checked program on Spark DataFrames.

Layer: datalog (back end). May import the datalog language modules (ast, checks,
functions, passes, schema, sources) and pyspark, the latter ONLY inside
functions or under `TYPE_CHECKING`, so `import datalog` never loads Spark.
Never imports `joins` or `differential`: this evaluator shares the parser, the
checks and the stratification with the embedded engine, not its dataflows.

- `session`: the process's SparkSession (local or a cluster), configured as the
  evaluator needs it.
- `transfer`: frames to Arrow batches on the driver, a partition at a time, and
  the progress of a load.
- `columns`: terms (arithmetic, functors, comparisons) as Spark columns.
- `body`: a rule body as a DataFrame of variable bindings (joins, anti-joins,
  aggregates).
- `evaluate`: strata in order; semi-naive iteration for recursive ones.
- `squaring`: a linear transitive closure rewritten non-linear (log2 of the rounds).
- `run`: `deltalog run --engine spark`: fact files in, output files out.
"""
