"""Durable storage: framed log records, snapshots and the directory that holds them.

Layer: datalog.storage, above `datalog.lang` (its errors) and below `datalog.db`.
Imports numpy, pyarrow and the standard library; never `differential`, `joins` or
`server`. `datalog.db.durable` drives it.
"""
