"""Facts in and out of a `Database`: files, frames and Spark.

Layer: datalog.io, above `datalog.db` (it uses the public database API, the
language and the evaluators' value conversions); below `datalog.cli`. Never
`joins` or `differential` directly. `sources` reads and writes Soufflé fact files,
Parquet, Spark frames and streams; `spark` runs a checked program on Spark
DataFrames (the scale-out twin of the embedded engine). pyspark and pyarrow are
imported only inside functions.
"""
