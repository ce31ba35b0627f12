"""Warm starts: each ``warm_start`` test run alone twice more, in two freshly started
processes (not forks) sharing one new cache directory of its own: the parent's side
(:mod:`.parent`: the environment, the options, the limit, the verdict) and the child's
(:mod:`.child`: the test run by pytest, torch's cache lookups captured and handed back).
"""
