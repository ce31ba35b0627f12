"""pytest-recompile's start-up hook for the child processes of a gated test.

This directory is put first on ``PYTHONPATH`` only while a pytest session with the gate runs
(see ``pytest_recompile/processes.py``); the session takes it off again. Here nothing is
imported: a finder waits for ``torch._dynamo`` and, once it is imported, starts recording
(``pytest_recompile.child.start``). Then the ``sitecustomize`` that this one shadows, if any,
runs as it would have.
"""

import os
import sys


def _pytest_recompile_watch() -> None:
    spool = os.environ.get("PYTEST_RECOMPILE_SPOOL")
    if not spool:
        return

    class Watch:
        """Wraps the loader of ``torch._dynamo`` to start recording when it is imported."""

        def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
            if name != "torch._dynamo":
                return None
            sys.meta_path.remove(self)
            import importlib.util

            spec = importlib.util.find_spec(name)
            loader = getattr(spec, "loader", None)
            if spec is None or loader is None or not hasattr(loader, "exec_module"):
                return spec
            run = loader.exec_module

            def exec_module(module):  # type: ignore[no-untyped-def]
                run(module)
                try:
                    from pytest_recompile import child

                    child.start(str(spool))
                except Exception as exc:  # never the child's error
                    sys.stderr.write(
                        f"pytest-recompile (pid {os.getpid()}): recording off in this child: "
                        f"{type(exc).__name__}: {exc}\n"
                    )

            loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Watch())


def _pytest_recompile_chain() -> None:
    """Run the sitecustomize this one shadows (the next one on sys.path), if there is one."""
    here = os.path.dirname(os.path.abspath(__file__))
    saved = sys.path[:]
    mine = sys.modules.pop("sitecustomize")
    sys.path[:] = [p for p in saved if os.path.abspath(p or os.curdir) != here]
    try:
        import sitecustomize  # type: ignore[import-not-found]  # noqa: F401
    except ImportError as exc:
        sys.modules["sitecustomize"] = mine  # the import of this one ends with it
        if exc.name != "sitecustomize":
            raise
    finally:
        sys.path[:] = [p for p in saved if os.path.abspath(p or os.curdir) != here]


_pytest_recompile_watch()
_pytest_recompile_chain()
