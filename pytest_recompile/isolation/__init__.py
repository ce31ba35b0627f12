"""What each test starts from: who compiled each cache entry (the ledger), each owner, which
earlier first compiles may answer a later test, and who started each thread. Plain Python over
``_torch``.
"""
