"""joins: delta queries and worst-case optimal joins over arrangements.

Layer: above `differential`, below `datalog`. May import `differential`; knows
arrangements, not syntax.
"""
