"""Sources and sinks of facts: files and frames that feed a `Database`.

Layer: datalog (sources). Uses only the public API of `datalog` (Database,
transactions, queries, the schema and the program's directives) and pyarrow;
never `joins` or `differential` directly. Heavy or optional readers (Spark)
import their libraries inside functions.

`datalog.io.sources.csv` reads and writes Soufflé-compatible fact files for
`.input` / `.output` directives.
"""
