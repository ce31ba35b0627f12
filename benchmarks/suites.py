"""The suites the benchmarks run, written as source into a folder of their own."""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_startup_suite(root: Path, tests: int) -> None:
    per_file = 20
    for index in range(max(1, tests // per_file)):
        body = "\n".join(
            f"def test_{index}_{n}():\n    assert {n} + 1 == {n + 1}\n" for n in range(per_file)
        )
        (root / f"test_plain_{index}.py").write_text(body)


def write_gated_suite(root: Path, tests: int, calls: int) -> None:
    functions = "\n".join(
        textwrap.dedent(
            f"""
            def test_{n}():
                @torch.compile(backend="eager")
                def f(x):
                    return (x * {n + 2}).sin() + {n}
                x = torch.ones(8)
                for _ in range({calls}):
                    f(x)
            """
        )
        for n in range(tests)
    )
    (root / "test_gated.py").write_text("import torch\n" + functions)


def write_hot_suite(root: Path, calls: int) -> None:
    """One test alternating blocks of calls with the gate's tracker active (B) and not (A),
    ABBA, in one warm process: cache-hit timing is too noisy across processes on a shared
    machine to resolve 2%, and the tracker is what a gated test runs under."""
    (root / "test_hot.py").write_text(
        textwrap.dedent(
            f"""
            import json, os, time
            import torch
            from pytest_recompile import RecompileTracker

            @torch.compile(backend="eager")
            def f(x):
                return x * 2 + 1

            def test_hot():
                x = torch.ones(4)
                for _ in range(100):
                    f(x)
                per_block, blocks = 500, 2 * max(1, {calls} // 500)
                times = {{"a": [], "b": []}}
                for i in range(blocks):
                    gated = (i % 4) in (1, 2)
                    tracker = RecompileTracker(max_recompiles=0, reset=False) if gated else None
                    if tracker:
                        tracker.start()
                    start = time.perf_counter()
                    for _ in range(per_block):
                        f(x)
                    times["b" if gated else "a"].append(time.perf_counter() - start)
                    if tracker:
                        tracker.stop()
                        assert tracker.count() == 0
                with open(os.environ["BENCH_OUT"], "w") as out:
                    json.dump(times, out)
            """
        )
    )


def write_children_suite(root: Path, blocks: int, plain: int) -> None:
    """One gated test timing blocks of children with the contract's environment (B) and
    without it (A), ABBA: both kinds of children in one process, side by side."""
    (root / "test_children.py").write_text(
        textwrap.dedent(
            f"""
            import json, multiprocessing, os, subprocess, sys, time

            CONTRACT = ("PYTEST_RECOMPILE_SPOOL", "PYTHONPATH", "PYTEST_RECOMPILE_SITECUSTOMIZE")

            def compile_one():
                import torch
                f = torch.compile(lambda x: x * 2 + 1, backend="eager")
                f(torch.ones(4))

            def spawn_two():
                ctx = multiprocessing.get_context("spawn")
                children = [ctx.Process(target=compile_one) for _ in range(2)]
                for child in children:
                    child.start()
                for child in children:
                    child.join()
                    assert child.exitcode == 0

            def plain():
                for _ in range({plain}):
                    subprocess.run([sys.executable, "-c", "pass"], check=True)

            def timed(block, contract):
                saved = {{name: os.environ.get(name) for name in CONTRACT}}
                if not contract:
                    for name in CONTRACT:
                        os.environ.pop(name, None)
                try:
                    start = time.perf_counter()
                    block()
                    return time.perf_counter() - start
                finally:
                    for name, value in saved.items():
                        if value is not None:
                            os.environ[name] = value

            def test_children():
                assert os.environ.get("PYTEST_RECOMPILE_SPOOL"), "run it gated"
                times = {{"compile": {{"a": [], "b": []}}, "plain": {{"a": [], "b": []}}}}
                for kind, block in (("compile", spawn_two), ("plain", plain)):
                    timed(block, True)  # warm the file system for both
                    for i in range(2 * {blocks}):
                        contract = (i % 4) in (1, 2)
                        times[kind]["b" if contract else "a"].append(timed(block, contract))
                times["contract"] = {{name: os.environ.get(name) for name in CONTRACT}}
                with open(os.environ["BENCH_OUT"], "w") as out:
                    json.dump(times, out)
            """
        )
    )


def write_step_conftest(root: Path, backend: str) -> None:
    """Start the compiler up once at collection, on a function of its own, as the tests
    before this one would have in a real suite: the time to verdict is then the test's own
    compiles, not the compiler's one-time start-up (imports, the C++ toolchain)."""
    options = "" if backend == "inductor" else f'backend="{backend}"'
    (root / "conftest.py").write_text(
        textwrap.dedent(
            f"""
            import torch

            torch.compile(lambda x: (x + 3).cos(), {options})(torch.ones(3))
            torch._dynamo.reset()
            """
        )
    )


def write_step_suite(root: Path, backend: str) -> None:
    decorator = (
        "@torch.compile" if backend == "inductor" else f'@torch.compile(backend="{backend}")'
    )
    (root / "test_step.py").write_text(
        textwrap.dedent(
            f"""
            import torch

            step = 0

            {decorator}
            def scaled(x):
                return (x * 2).sin() * (step + 1)

            def test_steps():
                global step
                for i in range(10):
                    step = i
                    scaled(torch.ones(16))
            """
        )
    )


TRANSFORMER = """
import pytest
import torch

class Split(torch.nn.Module):
    \"\"\"The encoder's two layers with a graph break between them (a print, a log call).\"\"\"

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, x):
        x = self.encoder.layers[0](x)
        torch._dynamo.graph_break()
        return self.encoder.layers[1](x)

def make_model(split=False):
    layer = torch.nn.TransformerEncoderLayer(d_model=64, nhead=4, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, num_layers=2).eval()
    return torch.compile(Split(model) if split else model{options})
"""


def write_transformer_suite(root: Path, tests: int, backend: str, *, kind: str) -> None:
    """``tests`` tests each calling the model three times at one shape under no_grad. The
    model is warmed in a module-scoped fixture (``warmed``), compiled at module level and
    first called inside the tests (``inside``; ``batches``: each test at one of three batch
    sizes; ``split``: its forward split by a graph break), or built and compiled in each test
    (``rebuilt``; ``split_rebuilt``: split by a graph break)."""
    options = "" if backend == "inductor" else f', backend="{backend}"'
    head = TRANSFORMER.format(options=options)
    fixtures = {
        "warmed": """
            @pytest.fixture(scope="module")
            def model():
                compiled = make_model()
                with torch.no_grad():
                    compiled(torch.randn(4, 16, 64))
                return compiled
            """,
        "inside": """
            compiled = make_model()

            @pytest.fixture
            def model():
                return compiled
            """,
        "rebuilt": """
            @pytest.fixture
            def model():
                return make_model()
            """,
        "split": """
            compiled = make_model(split=True)

            @pytest.fixture
            def model():
                return compiled
            """,
        "split_rebuilt": """
            @pytest.fixture
            def model():
                return make_model(split=True)
            """,
    }
    head += textwrap.dedent(fixtures["inside" if kind == "batches" else kind])
    batches = [2, 4, 8] if kind == "batches" else [4]
    body = "\n".join(
        textwrap.dedent(
            f"""
            def test_{n}(model):
                x = torch.randn({batches[n % len(batches)]}, 16, 64)
                with torch.no_grad():
                    for _ in range(3):
                        model(x)
            """
        )
        for n in range(tests)
    )
    (root / "test_model.py").write_text(head + body)


def write_fast_suite(root: Path, tests: int) -> None:
    """``tests`` fast tests, eager backend, of three kinds in turn: a module fixture's warmed
    compiled function, a module-level compiled function, and a function each test defines and
    compiles (a code object of each test's own: torch compiles it once, in that test)."""
    head = textwrap.dedent(
        """
        import pytest
        import torch

        @torch.compile(backend="eager")
        def shared(x):
            return x * 2 + 1

        def warm_me(x):
            return x - 1

        @pytest.fixture(scope="module")
        def warmed():
            compiled = torch.compile(warm_me, backend="eager")
            compiled(torch.ones(4))
            return compiled
        """
    )
    kinds = [
        "def test_{n}(warmed):\n    warmed(torch.ones(4))\n",
        "def test_{n}():\n    shared(torch.ones(4))\n",
        "def test_{n}():\n    def own(x):\n        return x + 3\n"
        '    torch.compile(own, backend="eager")(torch.ones(4))\n',
    ]
    body = "\n\n".join(kinds[n % 3].format(n=n) for n in range(tests))
    (root / "test_fast.py").write_text(head + "\n\n" + body)


def write_deep_suite(root: Path, tests: int, layers: int) -> None:
    """Tests that each compile a model of ``layers`` blocks: large guard trees to read."""
    (root / "test_deep.py").write_text(
        textwrap.dedent(
            f"""
            import pytest
            import torch

            class Block(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.linear = torch.nn.Linear(8, 8)

                def forward(self, x):
                    return torch.relu(self.linear(x))

            class Decoder(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.blocks = torch.nn.ModuleList(Block() for _ in range({layers}))

                def forward(self, x):
                    for block in self.blocks:
                        x = block(x)
                    return x

            @pytest.mark.parametrize("n", range({tests}))
            def test_deep(n):
                model = torch.compile(Decoder(), backend="eager")
                for _ in range(10):
                    model(torch.randn(4, 8))
            """
        )
    )
