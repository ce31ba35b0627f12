"""The plugin's own time per gated test, in situ on the fast suite of ``run.py --only fast``.

    python benchmarks/self_time.py                  # 1,500 tests, this checkout (a minute)
    python benchmarks/self_time.py --base REV       # and the plugin at REV, side by side

One gated run of the fast suite (``--recompile-budget``), with a timing plugin loaded beside
pytest-recompile. The timing plugin wraps every hook implementation the plugin registered (the
gate's, the summary's: pytest's, pluggy's and other plugins' time is not counted) and the
callbacks torch makes into the plugin during a call (a compile, an offered entry's guard, a
reuse), and adds up, per test, the time spent in the plugin's own code: for a hook wrapper,
the steps before and after its ``yield``, never what runs inside it (the test). The figures are
``time.perf_counter_ns`` around each step, so each step also pays the timer's own cost (about
0.1 µs a step, a few µs a test).

It prints, for each of the suite's three kinds of test (calling a module fixture's warmed
compiled function, which compiles nothing; a module-level one, answered in a gated run by the
first such test's compile, reused; one it defines and compiles, compiled in each test), the
median and the 10th and 90th percentiles of the plugin's time per test, and the mean time of
each hook and callback.
``--detail`` adds inclusive timers around the plugin's inner steps (nested: not summed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from suites import write_fast_suite

KINDS = ("fixture's warmed function", "module-level function", "own function")

TIMER = '''
"""Timing plugin (written by benchmarks/self_time.py): the plugin's own time per test."""
import functools, importlib, json, os, time

import pytest

now = time.perf_counter_ns
TOTAL = {}       # nodeid -> ns spent in the plugin's code, outermost timers only
PARTS = {}       # nodeid -> {label: ns}
current = ["(outside tests)"]
depth = [0]


def add(label, ns, outer):
    parts = PARTS.setdefault(current[0], {})
    parts[label] = parts.get(label, 0) + ns
    if outer:
        TOTAL[current[0]] = TOTAL.get(current[0], 0) + ns


def timed(label, fn):
    @functools.wraps(fn)
    def inner(*args, **kwargs):
        depth[0] += 1
        start = now()
        try:
            return fn(*args, **kwargs)
        finally:
            depth[0] -= 1
            add(label, now() - start, depth[0] == 0)
    return inner


def step(label, call):
    depth[0] += 1
    start = now()
    try:
        return call()
    finally:
        depth[0] -= 1
        add(label, now() - start, depth[0] == 0)


def timed_wrapper(label, fn):
    """A hook wrapper's steps, timed; what runs at its yield is not."""
    def inner(*args):
        gen = fn(*args)
        try:
            value = step(label, gen.__next__)
        except StopIteration as stop:
            return stop.value
        while True:
            try:
                sent = yield value
            except BaseException as exc:
                try:
                    value = step(label, lambda exc=exc: gen.throw(exc))
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    value = step(label, lambda sent=sent: gen.send(sent))
                except StopIteration as stop:
                    return stop.value
    return inner


def patch(dotted, label):
    module_name, _, attr = dotted.partition(":")
    try:
        owner = importlib.import_module(module_name)
    except ImportError:
        return
    *path, name = attr.split(".")
    for part in path:
        owner = getattr(owner, part, None)
        if owner is None:
            return
    fn = getattr(owner, name, None)
    if fn is not None:
        setattr(owner, name, timed(label, fn))


def answers(fn):
    @functools.wraps(fn)
    def make(*args, **kwargs):
        return timed("callback: an offered entry's guard", fn(*args, **kwargs))
    return make


# torch's callbacks into the plugin during a test's call (bound before the first test).
for dotted in ("on_compile", "on_stopped", "on_reuse"):
    patch(f"pytest_recompile.gate:Gate.{dotted}", f"callback: Gate.{dotted}")
try:
    import pytest_recompile._torch.entries as _entries
    _entries._answers = answers(_entries._answers)
except (ImportError, AttributeError):
    pass
for dotted in filter(None, os.environ.get("SELF_TIME_DETAIL", "").split(",")):
    patch(dotted, "detail: " + dotted.partition(":")[2])


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session):
    """Wrap every hook implementation of pytest-recompile's plugins (registered by now)."""
    pm = session.config.pluginmanager
    for plugin in pm.get_plugins():
        module = getattr(plugin, "__module__", None) or getattr(plugin, "__name__", "")
        if not str(module).startswith("pytest_recompile"):
            continue
        name = type(plugin).__name__ if not hasattr(plugin, "__file__") else "plugin"
        for caller in pm.get_hookcallers(plugin) or []:
            for impl in caller.get_hookimpls():
                if impl.plugin is plugin:
                    label = f"hook: {name}.{caller.name}"
                    if impl.wrapper or impl.hookwrapper:
                        impl.function = timed_wrapper(label, impl.function)
                    else:
                        impl.function = timed(label, impl.function)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item):
    current[0] = item.nodeid
    TOTAL.setdefault(item.nodeid, 0)
    yield
    current[0] = "(outside tests)"


def pytest_unconfigure(config):
    out = os.environ.get("SELF_TIME_OUT")
    if out:
        with open(out, "w") as f:
            json.dump({"total": TOTAL, "parts": PARTS}, f)
'''


def measure(suite: Path, env: dict[str, str]) -> dict:
    out = suite / "self_time.json"
    out.unlink(missing_ok=True)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-p", "selftimer", "--recompile-budget", "test_fast.py"],
        cwd=suite, env={**env, "SELF_TIME_OUT": str(out)},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0 or not out.exists():
        raise SystemExit(f"the gated run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(out.read_text())


def kind(nodeid: str) -> int:
    return int(nodeid.rsplit("_", 1)[1]) % 3


def summary(found: dict, label: str) -> list[str]:
    lines = [f"## {label}", ""]
    total = {k: v for k, v in found["total"].items() if k.startswith("test_fast.py::")}
    lines.append("| test calls | tests | median ms | p10 | p90 |")
    lines.append("|---|---|---|---|---|")
    every = sorted(total.values())
    for index, name in enumerate(KINDS):
        times = sorted(v / 1e6 for k, v in total.items() if kind(k) == index)
        if len(times) < 2:
            continue
        deciles = statistics.quantiles(times, n=10)
        lines.append(
            f"| {name} | {len(times)} | {statistics.median(times):.3f} | {deciles[0]:.3f} "
            f"| {deciles[-1]:.3f} |"
        )
    deciles = statistics.quantiles([v / 1e6 for v in every], n=10)
    lines.append(
        f"| all | {len(every)} | {statistics.median(every) / 1e6:.3f} | {deciles[0]:.3f} "
        f"| {deciles[-1]:.3f} |"
    )
    lines += ["", "Mean ms per test, by hook and callback (the first test of each kind left out):"]
    lines.append("")
    lines.append("| where | " + " | ".join(KINDS) + " |")
    lines.append("|---|" + "---|" * len(KINDS))
    parts = {k: v for k, v in found["parts"].items() if k in total}
    labels = sorted({label for p in parts.values() for label in p})
    for label in labels:
        row = []
        for index in range(len(KINDS)):
            tests = [p for k, p in parts.items() if kind(k) == index][1:]
            row.append(f"{sum(p.get(label, 0) for p in tests) / max(1, len(tests)) / 1e6:.4f}")
        lines.append(f"| {label} | " + " | ".join(row) + " |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=1500)
    parser.add_argument("--base", default=None, metavar="REV", help="also the plugin at REV")
    parser.add_argument(
        "--detail", default="", help="comma-separated module:Class.method to time inclusively"
    )
    args = parser.parse_args()
    repo = Path(__file__).resolve().parent.parent
    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory(prefix="recompile-self-time-") as tmp:
        root = Path(tmp)
        suite = root / "suite"
        suite.mkdir()
        write_fast_suite(suite, args.tests)
        (suite / "selftimer.py").write_text(textwrap.dedent(TIMER))
        variants = [("this checkout", repo)]
        if args.base:
            tree = root / "base"
            subprocess.run(
                ["git", "worktree", "add", "--detach", str(tree), args.base],
                cwd=repo, check=True, capture_output=True,
            )  # fmt: skip
            variants.insert(0, (f"at {args.base}", tree))
        try:
            for label, where in variants:
                env = {**base_env, "PYTHONPATH": f"{where}{os.pathsep}{suite}",
                       "SELF_TIME_DETAIL": args.detail}  # fmt: skip
                measure(suite, env)  # warm the bytecode caches
                print("\n".join(summary(measure(suite, env), label)) + "\n")
        finally:
            if args.base:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(root / "base")],
                    cwd=repo, check=False, capture_output=True,
                )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
