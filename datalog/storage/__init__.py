"""Durable storage: framed log records, snapshots and the directory that holds them.

Layer: datalog. Imports numpy, pyarrow and the standard library; never
`differential`, `joins` or `server`. `datalog.db.database` drives it.
"""
