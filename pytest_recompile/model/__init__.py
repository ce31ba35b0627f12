"""Values and their wording: the records, the rules and their judgement, the result
model every output is rendered from, and the one module that words it all. No torch, no
pytest.
"""
