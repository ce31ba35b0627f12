# pytest-recompile's start-up hook for the child processes of a gated test.
#
# This directory is put first on PYTHONPATH only while a pytest session with the gate runs
# (see pytest_recompile/children/parent.py); the session takes it off again. Here nothing is
# imported: this module, on sys.meta_path, waits for torch._dynamo and, once it is imported,
# starts recording (children.child.start). Then the sitecustomize that this one shadows, if
# any, runs as it would have.
#
# Every child of a gated test runs this, including the many that never import torch, so it is
# kept to what Python's start-up cannot do without (benchmark `children`): comments rather than
# docstrings (less to unmarshal), no class built, no path normalised (site has already made
# sys.path absolute before it imports this module).

import os
import sys

_spool = os.environ.get("PYTEST_RECOMPILE_SPOOL")


def find_spec(name, path=None, target=None):  # type: ignore[no-untyped-def]
    # This module is its own finder: it wraps the loader of torch._dynamo to start recording
    # once that is imported, and steps aside for every other name.
    if name != "torch._dynamo":
        return None
    sys.meta_path.remove(_self)
    import importlib.util

    spec = importlib.util.find_spec(name)
    loader = getattr(spec, "loader", None)
    if spec is None or loader is None or not hasattr(loader, "exec_module"):
        return spec
    run = loader.exec_module

    def exec_module(module):  # type: ignore[no-untyped-def]
        run(module)
        try:
            from pytest_recompile.children import child

            child.start(str(_spool))
        except Exception as exc:  # never the child's error
            sys.stderr.write(
                f"pytest-recompile (pid {os.getpid()}): recording off in this child: "
                f"{type(exc).__name__}: {exc}\n"
            )

    loader.exec_module = exec_module
    return spec


def _pytest_recompile_chain() -> None:
    # Run the sitecustomize this one shadows, if there is one: the session names it (the one
    # its own interpreter loaded) for a child of the same interpreter; another interpreter
    # looks for the next one on sys.path.
    here = os.path.dirname(__file__)
    sys.path[:] = [p for p in sys.path if p != here]
    prefix, _, shadowed = os.environ.get("PYTEST_RECOMPILE_SITECUSTOMIZE", "").rpartition("|")
    if prefix == sys.prefix and not shadowed:
        return  # the session's interpreter had none: the import of this one ends with it
    mine = sys.modules.pop("sitecustomize")
    try:
        if prefix == sys.prefix:
            import importlib.util

            spec = importlib.util.spec_from_file_location("sitecustomize", shadowed)
            if spec is None or spec.loader is None:
                raise ImportError(name="sitecustomize")
            module = importlib.util.module_from_spec(spec)
            sys.modules["sitecustomize"] = module
            spec.loader.exec_module(module)
        else:
            import sitecustomize  # type: ignore[import-not-found]  # noqa: F401
    except ImportError as exc:
        sys.modules["sitecustomize"] = mine  # the import of this one ends with it
        if exc.name != "sitecustomize":
            raise


_self = sys.modules[__name__]
if _spool:
    sys.meta_path.insert(0, _self)
_pytest_recompile_chain()
