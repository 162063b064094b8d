"""bench: benchmarks, data generators and peer baselines (DuckDB).

Layer: bench — may import anything public from the deltalog packages (`datalog`,
`joins`, `differential`, `server`) and the peers in `bench.peers`; nothing in those
packages imports `bench`. Benchmarks measure and print; they never assert times.
Runnable benchmarks are the modules named `bench/bench_*.py`; `make bench-core`
runs each of them with `python -m bench.<name>`.
"""
