"""bench.peers: other systems run on the same data, as baselines.

Layer: bench — imports numpy, pyarrow and the peer's own client (imported by the
peer module, so `import bench.peers` costs nothing).
"""
