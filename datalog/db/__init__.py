"""The database: the public `Database` and everything that keeps it consistent.

Layer: datalog.db, above `datalog.lang`, `datalog.eval`, `datalog.plan` and
`datalog.storage` (it may import those, `joins` and `differential`); below
`datalog.io` and `datalog.cli`. `database` is the API; `definitions` the program in
force; `transaction` and `epochs` the one commit path; `queries`, `live`, `pacing`
and `tenants` the live queries and their subscribers; `durable` the log and
checkpoints over `datalog.storage`; `history`, `provenance` and `introspection`
time travel, `why` and the `deltalog.*` relations.
"""
