"""Child processes: the parent's side (the environment contract, the spool, the records read
back), the child's side (recording and refusing compiles there) and the start-up hook a child
runs (``_startup/sitecustomize.py``).
"""
