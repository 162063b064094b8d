"""server: the WebSocket subscription server and its protocol.

Layer: top. Uses only the public API of `datalog`.
"""
