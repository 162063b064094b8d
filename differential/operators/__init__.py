"""Operators, one family per module.

Layer: differential. `linear` (map, filter, flat_map, concat, negate, enter,
leave), `arrange` (arrangements and their imports), `join`, `reduce`,
`iterate` (scopes and variables), `capture` (outputs).
"""
