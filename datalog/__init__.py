"""datalog: the language, the planner and the public API.

Layer: above `joins` and `differential`; may import both, never `server`.
"""
