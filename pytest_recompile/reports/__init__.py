"""The session's outputs, from the results the reports carried: the terminal summary, the
durations section, the JSON report, JUnit properties, the Markdown summary and GitHub
annotations, the baseline, the recompile_limit figure, and the files they are written to.
"""
