"""The outputs, each rendered from one results model (a session's, a report's read back, or
shards' combined): the terminal summary, the durations, the JSON report, JUnit properties, the
Markdown summary and GitHub annotations, the baseline, the recompile_limit figure, compare and
combine, and the files they are written to.
"""
