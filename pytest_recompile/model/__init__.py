"""Values: the records, the rules and their judgement, guard kinds and hints, the one results
model every output is rendered from, and the wording of broken rules (``messages.py``). No
torch, no pytest.
"""
