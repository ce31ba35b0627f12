"""What one block compiled: the tracker that listens to torch, the per-function records, the
guard trees read at each compile, the failures raised, a gated test's verdict and its frozen
result. Plain Python: it works outside pytest too.
"""
