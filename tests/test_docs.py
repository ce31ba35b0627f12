"""The documentation, checked, so that it cannot go stale.

Every fenced block of README.md, CONTRIBUTING.md, benchmarks/README.md and docs/*.md names,
in the HTML comment before it, the test that checks it (``tests/docblocks.py``): here or in
``tests/test_example.py``. Python blocks are run under pytest, pasted outputs compared with
the run's, and commands that install things or take minutes compared with what CI runs.
The pytest runs here are in-process (the ``run`` fixture makes that safe for torch) and use
the eager backend: the whole module takes seconds, not minutes.
"""

from __future__ import annotations

import json
import re
import runpy
import shlex
import sys
from collections.abc import Callable
from fnmatch import fnmatch
from importlib.metadata import version
from pathlib import Path

import pytest
from docblocks import (
    MARKER,
    PASTED_ON,
    ROOT,
    Block,
    all_blocks,
    assert_pasted,
    blocks,
    checked_blocks,
    compares_its_blocks,
    documents,
    pattern,
    readme_example_args,
    reads_its_blocks,
    stray_markers,
    torch_worded,
)
from snippets import TORCH_RELEASE, inner_args, keeps_entries

Run = Callable[..., pytest.RunResult]


@pytest.fixture
def inner(run: object, pytester: pytest.Pytester) -> Run:
    """pytest in-process on pytester's directory, each run from a fresh compile state, as a
    fresh process would be (requesting ``run`` makes in-process runs safe for torch)."""

    def run_(*args: str) -> pytest.RunResult:
        if "torch._dynamo" in sys.modules:
            sys.modules["torch._dynamo"].reset()
        return pytester.runpytest(*inner_args(*args, "-p", "no:randomly", "-p", "no:logging"))

    return run_


def write(pytester: pytest.Pytester, name: str, block: Block) -> Path:
    path = pytester.path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(block.text)
    return path


def of(found: list[Block], lang: str) -> list[Block]:
    return [block for block in found if block.lang == lang]


def pytest_args(command: str) -> list[str]:
    """The arguments of a documented ``pytest ...`` command."""
    words = shlex.split(command)
    assert words[0] == "pytest", command
    return words[1:]


# -- the rule: every block is checked ---------------------------------------------------------


def test_every_block_is_checked(request: pytest.FixtureRequest) -> None:
    problems = [f"{where}: a marker with no fence after it" for d in documents() for where in
                stray_markers(d)]  # fmt: skip
    for block in all_blocks():
        if not block.lang:
            problems.append(f"{block}: a fence without a language (shell, text, python, ...)")
        if block.checked_by is None:
            problems.append(f"{block}: no '<!-- checked: tests/...::test_... -->' before it")
        elif not reads_its_blocks(block.checked_by):
            problems.append(f"{block}: {block.checked_by} is no test that reads its blocks")
    assert not problems, "\n".join(problems)
    # CONTRIBUTING.md's example of a marker is one.
    for block in checked_blocks(request):
        marker = MARKER.fullmatch(block.text.strip())
        assert marker is not None, block
        assert reads_its_blocks(marker.group(1)), block


def test_a_test_that_reads_blocks_must_compare_them() -> None:
    """The marker check can fail: a test that reads its blocks and compares nothing is none."""
    reads_only = (
        "def test_x(request):\n    for block in checked_blocks(request):\n        print(block)\n"
    )
    assert not compares_its_blocks(reads_only, "test_x")
    asserts = reads_only + "    assert block.text\n"
    assert compares_its_blocks(asserts, "test_x")
    pasted = reads_only + "    assert_pasted(block, 'out')\n"
    assert compares_its_blocks(pasted, "test_x")
    compares_only = "def test_x():\n    assert 1\n"
    assert not compares_its_blocks(compares_only, "test_x")


def test_torch_wording_is_compared_where_this_release_words_it_alike() -> None:
    patterns = ["  fix: Avoid calling builtin `print`", "graph break 1 at t.py:3", "plain"]
    lines = ["  fix: Do not call print", "graph break 1 at t.py:3", "plain"]
    assert torch_worded(patterns, lines) == ["  fix: *", "graph break 1 at t.py:3", "plain"]
    # the plugin's words before torch's part still count, and a line without one is exact
    assert not fnmatch("  hint: Do not call print", torch_worded(patterns, lines)[0])
    assert torch_worded(["gone"], ["other"]) == ["gone"]


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file."""
    found = set()
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def test_relative_links_resolve() -> None:
    broken = []
    for doc in documents():
        text = doc.read_text()
        for block in blocks(doc):  # links inside code are code
            text = text.replace(block.text, "")
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = (doc.parent / path).resolve() if path else doc
            name = f"{doc.relative_to(ROOT)}: {target}"
            if not resolved.exists():
                broken.append(f"{name} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{name} (no such heading)")
    assert not broken, "\n".join(broken)


# -- the options page is the plugin's surface ---------------------------------------------


OPTION = re.compile(r"--recompile-[a-z]+(?:-[a-z]+)*")
INI = re.compile(r"^  (recompile_\w+) \(", re.MULTILINE)
MARK = re.compile(r"@pytest\.mark\.(\w+)")


def table_cells(text: str, first: str) -> list[list[str]]:
    """The cells of the Markdown table rows whose first cell starts with ``first``."""
    return [
        [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        for line in text.splitlines()
        if line.startswith(f"| {first}")
    ]


def test_options_page_documents_what_the_plugin_registers(pytester: pytest.Pytester) -> None:
    help_text = pytester.runpytest(*inner_args("--help")).stdout.str()
    options = set(OPTION.findall(help_text))
    inis = set(INI.findall(help_text))
    markers = set(MARK.findall(pytester.runpytest(*inner_args("--markers")).stdout.str()))
    off = pytester.runpytest(*inner_args("--markers", "-p", "no:recompile"))
    others = set(MARK.findall(off.stdout.str()))
    ours = markers - others
    assert options
    assert inis
    assert ours

    page = (ROOT / "docs" / "options.md").read_text()
    rows = table_cells(page, "`--recompile")
    assert {o for row in rows for o in OPTION.findall(row[0])} == options
    assert {i for row in rows for i in re.findall(r"recompile_\w+", row[1])} == inis
    assert {m for row in table_cells(page, "`@pytest.mark.") for m in MARK.findall(row[0])} == ours
    # Nowhere do the documents name an option or a marker that does not exist.
    for doc in documents():
        text = doc.read_text()
        assert set(OPTION.findall(text)) <= options, doc
        assert set(MARK.findall(text)) <= markers, doc


def test_guard_kinds_page_names_every_kind() -> None:
    from pytest_recompile.model.guards import ALIASES, KINDS

    page = (ROOT / "docs" / "guard-kinds.md").read_text()
    named = {k for row in table_cells(page, "`") for k in re.findall(r"`([A-Z_]+)", row[0])}
    assert named == set(KINDS)
    aliases = re.search(r"torch's aliases \(([^)]*)\)", page)
    assert aliases is not None
    assert set(re.findall(r"`(\w+)`", aliases.group(1))) <= set(ALIASES)


LAYERS = ("model", "_torch", "isolation", "recording", "children", "restarts", "reports", "")
"""The package's layers, lowest first: its subpackages, then the top level (the pytest layer)."""


def layer_of(module: str) -> str:
    """``recording/tracker.py`` -> ``recording``; a top-level module -> ``""``."""
    head, _, rest = module.partition("/")
    return head if rest else ""


def module_map() -> dict[str, str]:
    """docs/how-it-works.md's module table: module -> role."""
    page = (ROOT / "docs" / "how-it-works.md").read_text()
    return {row[0].strip("`"): row[1] for row in table_cells(page, "`")}


def package_modules() -> dict[str, Path]:
    package = ROOT / "pytest_recompile"
    return {
        path.relative_to(package).as_posix(): path
        for path in package.rglob("*.py")
        if path.name != "__init__.py" and "__pycache__" not in path.parts
    }


def imports_of(path: Path) -> set[str]:
    """Every module this file imports, lazy and type-checking imports included, as dotted
    names relative to the package (``_torch.entries``) or absolute (``pytest``)."""
    import ast

    package = ROOT / "pytest_recompile"
    parts = list(path.relative_to(package).with_suffix("").parts)
    here = parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = here[: len(here) - (node.level - 1)]
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            found |= {f"{target}.{alias.name}".strip(".") for alias in node.names} | {target}
        elif isinstance(node, ast.ImportFrom):
            found.add(node.module or "")
    return found


def test_the_module_map_is_the_package() -> None:
    mapped, modules = module_map(), package_modules()
    assert set(mapped) == set(modules), (
        sorted(set(mapped) - set(modules)),
        sorted(set(modules) - set(mapped)),
    )
    for name in modules:
        assert layer_of(name) in LAYERS, f"{name}: in no layer"


def test_every_subpackage_says_its_role() -> None:
    package = ROOT / "pytest_recompile"
    for init in package.glob("*/__init__.py"):
        doc = ast_docstring(init)
        assert doc, f"{init.parent.name}/ has no docstring saying its role"
        role = doc.strip().split("\n\n")[0]  # its first paragraph (_torch/ goes on to list)
        assert 1 <= len(role.splitlines()) <= 4, init


def ast_docstring(path: Path) -> str | None:
    import ast

    return ast.get_docstring(ast.parse(path.read_text()))


def test_the_top_level_is_the_pytest_layer_only() -> None:
    """... and the command line: ``cli.py`` (its parser and dispatch; the decisions are the
    model's, the work is in reports/) and ``__main__.py``, which only calls it."""
    command_line = ("__main__.py", "cli.py")
    top = [name for name in package_modules() if layer_of(name) == "" and name not in command_line]
    assert len(top) <= 10, top
    for name in command_line:
        assert imports_of(ROOT / "pytest_recompile" / name).isdisjoint({"pytest", "torch"})
    assert len((ROOT / "pytest_recompile" / "__main__.py").read_text().splitlines()) <= 10


def test_imports_go_down_the_layers_without_a_circle() -> None:
    """A module imports its own layer or lower ones (its package decides its layer), none
    below the top level imports pytest, the model imports no torch either, and no module
    reaches itself through the modules it imports."""
    modules = package_modules()
    dotted = {name.removesuffix(".py").replace("/", "."): name for name in modules}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        layer = LAYERS.index(layer_of(name))
        found = imports_of(path)
        graph[name] = {dotted[d] for d in found if d in dotted and dotted[d] != name}
        for other in graph[name]:
            assert LAYERS.index(layer_of(other)) <= layer, f"{name} imports {other}, a higher layer"
        roots = {d.split(".")[0] for d in found}
        if layer_of(name) != "":
            assert not roots & {"pytest", "_pytest"}, f"{name} imports pytest below the top level"
        if layer_of(name) == "model":
            assert "torch" not in roots, f"{name} imports torch in the model"

    def reach(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo += graph[name]
        return seen

    circles = sorted(name for name in graph if name in reach(name))
    assert not circles, f"import circles through {circles}"


def test_the_ci_scripts_name_test_files_that_exist() -> None:
    """A test file CI names by path (the pytest-8 lane, an --ignore) is still there: a move
    would otherwise drop it from CI without a word."""
    for script in (".ci/run", ".ci/torch-matrix", ".ci/torch-version"):
        path = ROOT / script
        if not path.exists():
            continue
        named = re.findall(r"tests/[\w/]+\.py", path.read_text())
        missing = [name for name in named if not (ROOT / name).exists()]
        assert not missing, f"{script} names {missing}"


# -- commands that install things or take minutes: what CI runs ----------------------------


def commands_in(found: list[Block]) -> list[str]:
    return [command for block in found for command in block.commands]


def commands_of(path: str) -> list[str]:
    """The commands a CI script or workflow runs, one per line, without pip's ``-q``."""
    found = []
    for line in (ROOT / path).read_text().splitlines():
        line = line.strip().removeprefix("run:").strip()
        if line and not line.startswith(("#", "-", "name:", "uses:", "with:", "if:")):
            found.append(re.sub(r" -q\b", "", line))
    return found


def pip_words(command: str) -> set[str] | None:
    """What a ``pip install`` installs, as a set of words (``-e .[a,b]`` as ``.[a]``, ``.[b]``);
    None for another command."""
    words = shlex.split(command.removeprefix(".venv/bin/"))
    if words[:2] != ["pip", "install"]:
        return None
    found = set()
    for word in words[2:]:
        extras = re.fullmatch(r"\.\[(.*)\]", word)
        found |= {f".[{e}]" for e in extras.group(1).split(",")} if extras else {word}
    return found


def runs_in_ci(command: str, ci: list[str]) -> bool:
    """The command is one CI runs, or installs a part of what a CI command installs."""
    if command in ci:
        return True
    wanted = pip_words(command)
    return wanted is not None and any(wanted <= (pip_words(c) or set()) for c in ci)


TORCH = re.compile(r"torch==[\d.]+")


def test_the_readme_commands_are_what_ci_runs(request: pytest.FixtureRequest) -> None:
    ci = commands_of(".ci/run")
    workflow = commands_of("examples/github-actions.yml")
    commands = [part for c in commands_in(checked_blocks(request)) for part in c.split(" && ")]
    assert ".venv/bin/python -m pytest -n 2" in commands  # the README's test command ...
    assert ".venv/bin/python -m pytest -n 2" in ci  # ... is CI's
    pins = {p for c in commands if c.startswith(".venv/bin/pip") for p in TORCH.findall(c)}
    assert pins == {p for c in ci if c.startswith(".venv/bin/pip") for p in TORCH.findall(c)}
    for command in commands:
        if command.startswith(".venv/bin/pytest examples"):
            # Run by tests/test_example.py, as written.
            assert command.split()[1:] == readme_example_args()
        elif command.startswith(".venv/bin/") and "--index-url" in command:
            # The CPU index: as the example workflow installs torch.
            assert runs_in_ci(command.removeprefix(".venv/bin/"), workflow), command
        elif command == "pip install /path/to/pytest-recompile":
            # From a checkout, as .ci/check-wheel installs the wheel it builds from one; the
            # workflow installs whatever its variable names (no release to name yet).
            assert runs_in_ci('pip install "$PYTEST_RECOMPILE" pytest-xdist', workflow)
            assert 'pip" wheel -q --no-deps -w' in (ROOT / ".ci" / "check-wheel").read_text()
        elif command.startswith("pip install"):
            assert runs_in_ci(command, workflow), command
        else:
            assert runs_in_ci(command, ci), command


def test_the_contributor_commands_are_what_ci_runs(request: pytest.FixtureRequest) -> None:
    ci = commands_of(".ci/run")
    commands = [part for c in commands_in(checked_blocks(request)) for part in c.split(" && ")]
    for command in commands:
        if "pre-commit" not in command:
            assert runs_in_ci(command, ci), command
    assert ".venv/bin/pre-commit install" in commands
    # The pre-commit hooks are CI's lint commands, on the files a commit changes.
    config = (ROOT / ".pre-commit-config.yaml").read_text()
    entries = re.findall(r"^\s+entry: (.+)$", config, re.MULTILINE)
    lint = [c for c in ci if c.startswith((".venv/bin/ruff", ".venv/bin/mypy"))]
    assert [e + (" ." if "ruff" in e else "") for e in entries] == lint


def test_the_inner_loop_skips_only_slow_tests(request: pytest.FixtureRequest) -> None:
    """The inner loop deselects the slow marker, which pyproject.toml registers; the alone-count
    cache's variable and file are the differential check's own."""
    from isolation import test_differential

    inner, write = commands_in(checked_blocks(request))
    assert shlex.split(inner) == [".venv/bin/python", "-m", "pytest", "-n", "2", "-m", "not slow"]
    assert '"slow: ' in (ROOT / "pyproject.toml").read_text()
    variable, python, *rest = shlex.split(write)
    assert variable == f"{test_differential.WRITE_ALONE}=1"
    test = "tests/isolation/test_differential.py"
    assert [python, *rest] == [".venv/bin/python", "-m", "pytest", test]
    cache = test_differential.ALONE_CACHE
    assert cache.relative_to(ROOT).as_posix() in (ROOT / "CONTRIBUTING.md").read_text()
    assert set(json.loads(cache.read_text())) == {"suite", "runs"}


def test_the_benchmark_tables_have_intervals(request: pytest.FixtureRequest) -> None:
    """A pasted benchmark table is the script's: its header, and each verdict what the row's
    interval says against its target (the rule of ``Result.verdict``)."""
    source = (ROOT / "benchmarks" / "run.py").read_text()
    for block in checked_blocks(request):
        header, _, *rows = block.lines
        for cell in header.strip("| ").split(" | "):
            assert cell in source, (block, cell)
        for row in rows:
            cells = [cell.strip() for cell in row.strip("|").split(" | ")]
            ratio, (low, high), target, verdict = (
                float(cells[6]), map(float, cells[7].split("-")), cells[8], cells[9]
            )  # fmt: skip
            assert low <= ratio <= high, row
            if target == "-":
                assert verdict == "-", row
                continue
            bound = float(target.removeprefix("<= "))
            expected = "met" if high <= bound else "NO" if low > bound else "inconclusive"
            assert verdict == expected, row


def test_the_benchmark_commands_exist(request: pytest.FixtureRequest) -> None:
    for block in checked_blocks(request):
        for command in block.commands:
            python, script, *args = shlex.split(command)
            assert python == "python", command
            source = (ROOT / script).read_text()
            for arg in args:  # an option, add_argument("--only", ...), or one of its choices
                assert f'"{arg}"' in source, (command, arg)


# -- blocks run under pytest -------------------------------------------------------------


def test_the_three_ways_to_gate(
    request: pytest.FixtureRequest, inner: Run, pytester: pytest.Pytester
) -> None:
    found = checked_blocks(request)
    (commands,) = of(found, "shell")
    (ini,) = of(found, "toml")
    marker, fixture = of(found, "python")
    write(pytester, "tests/test_marker.py", marker)
    write(pytester, "tests/test_fixture.py", fixture)

    # No flag: the fixture's assertions hold, and so does the marker's budget, on the one
    # recompile its comment names.
    ungated = inner("--recompile-report=report.json")
    ungated.assert_outcomes(passed=2)
    (marked,) = json.loads((pytester.path / "report.json").read_text())["tests"]
    (recompile,) = marked["functions"][0]["recompiles"]
    reason = recompile["reasons"][0]
    assert (reason["kind"], reason["text"]) == ("EQUALS_MATCH", "n == 2")
    # The ini option, then the flag, gate every test: each test's marker wins for its own.
    write(pytester, "pyproject.toml", ini)
    inner().assert_outcomes(passed=2)
    (pytester.path / "pyproject.toml").unlink()
    for command in commands.commands:
        inner(*pytest_args(command)).assert_outcomes(passed=2)

    # What the text after the fixture's example says: without its marker, the default budget
    # (ini option or flag) stops the test at its recompile.
    unmarked = fixture.text.replace("@pytest.mark.allow_recompiles", "# (no marker)")
    assert unmarked != fixture.text
    (pytester.path / "tests" / "test_fixture.py").write_text(unmarked)
    over = "*1 recompile of decode (TENSOR_MATCH(size): *), budget 0 ("
    write(pytester, "pyproject.toml", ini)
    by_ini = inner()
    by_ini.assert_outcomes(passed=1, failed=1)
    by_ini.stdout.fnmatch_lines([f"{over}recompile_budget*"])
    (pytester.path / "pyproject.toml").unlink()
    budget_0, budget_2 = (inner(*pytest_args(c)) for c in commands.commands)
    budget_0.assert_outcomes(passed=1, failed=1)
    budget_0.stdout.fnmatch_lines(
        [f"{over}--recompile-budget=0)", "*fail-fast: stopped at * in test_decoder, before *"]
    )
    budget_2.assert_outcomes(passed=2)


DIRECTORY_TESTS = {
    "tests/compiled/test_model.py": """
import pytest
import torch


@torch.compile(backend="eager")
def double(x):
    return x * 2


def test_two_sizes():
    double(torch.ones(2))
    double(torch.ones(3))  # 1 recompile


@pytest.mark.max_recompiles(1)
def test_two_sizes_on_purpose():
    double(torch.ones(2))
    double(torch.ones(3))
""",
    "tests/other/test_other.py": """
import torch


@torch.compile(backend="eager")
def triple(x):
    return x * 3


def test_elsewhere():
    triple(torch.ones(2))
    triple(torch.ones(3))  # 1 recompile, outside the gated directory
""",
}


def test_gating_one_directory(
    request: pytest.FixtureRequest, inner: Run, pytester: pytest.Pytester
) -> None:
    found = checked_blocks(request)
    (command,) = of(found, "shell")
    (ini,) = of(found, "toml")
    (conftest,) = of(found, "python")
    for name, source in DIRECTORY_TESTS.items():
        (pytester.path / name).parent.mkdir(parents=True, exist_ok=True)
        (pytester.path / name).write_text(source)
    inner("tests").assert_outcomes(passed=3)  # ungated
    gated = "FAILED tests/compiled/test_model.py::test_two_sizes - *"

    # A run of the directory, by its path or by testpaths: the other directory is not collected.
    (args,) = (pytest_args(c) for c in command.commands)
    by_path = inner(*args)
    by_path.assert_outcomes(failed=1, passed=1)
    by_path.stdout.fnmatch_lines([gated])
    write(pytester, "pyproject.toml", ini)
    by_ini = inner()
    by_ini.assert_outcomes(failed=1, passed=1)
    by_ini.stdout.fnmatch_lines([gated])
    (pytester.path / "pyproject.toml").unlink()

    # The conftest hook, in a run of everything: only the directory's tests are gated, and the
    # test with a count of its own keeps it.
    where = conftest.lines[0].removeprefix("# ")
    assert where == "tests/compiled/conftest.py"
    write(pytester, where, conftest)
    by_hook = inner("tests")
    by_hook.assert_outcomes(failed=1, passed=2)
    over = "*1 recompile of double (*), budget 0 (@max_recompiles(0))"
    by_hook.stdout.fnmatch_lines([over, gated])


def test_graph_breaks(
    request: pytest.FixtureRequest, inner: Run, pytester: pytest.Pytester
) -> None:
    (source,) = of(checked_blocks(request), "python")
    (pasted,) = of(checked_blocks(request), "text")
    write(pytester, "test_it.py", source)
    result = inner()
    result.assert_outcomes(failed=2)
    assert_pasted(pasted, result.stdout.str(), torch_wording=True)


@keeps_entries  # before torch 2.9, isolation is a reset: no warm-up is kept
def test_isolation_worked_example(
    request: pytest.FixtureRequest, inner: Run, pytester: pytest.Pytester
) -> None:
    (source,) = of(checked_blocks(request), "python")
    (pasted,) = of(checked_blocks(request), "text")
    write(pytester, "test_model.py", source)
    result = inner("--recompile-budget")
    result.assert_outcomes(failed=2, passed=3)
    assert_pasted(pasted, result.stdout.str())


def test_baseline(request: pytest.FixtureRequest, inner: Run, pytester: pytest.Pytester) -> None:
    found = checked_blocks(request)
    (source,) = of(found, "python")
    (commands,) = of(found, "shell")
    limit, update_end = of(found, "text")
    write(pytester, "test_suite.py", source)
    update_command, gate_command = commands.commands

    update = inner(*pytest_args(update_command))
    assert update.ret == pytest.ExitCode.TESTS_FAILED  # though every test passed
    update.assert_outcomes(passed=4)
    assert_pasted(update_end, update.stdout.str())
    gate = inner(*pytest_args(gate_command))
    gate.assert_outcomes(passed=1, failed=3)  # exactly the three the update named
    named = re.findall(r"^  (test_suite\.py::\w+): ", update.stdout.str(), re.MULTILINE)
    assert sorted(named) == sorted(re.findall(r"^FAILED (\S+)", gate.stdout.str(), re.M))
    assert_pasted(limit, gate.stdout.str())


def test_keeping_a_trace(
    request: pytest.FixtureRequest, inner: Run, pytester: pytest.Pytester
) -> None:
    (source,) = of(checked_blocks(request), "python")
    (command,) = of(checked_blocks(request), "shell")
    (failure,) = of(checked_blocks(request), "text")
    write(pytester, source.lines[0].removeprefix("# "), source)
    (args,) = (pytest_args(c) for c in command.commands)
    result = inner(*args)
    result.assert_outcomes(failed=1)
    assert_pasted(failure, result.stdout.str())
    (folder,) = (pytester.path / "traces").iterdir()
    assert "compilation_metrics" in (folder / "torch_trace.log").read_text()


def test_python_api(
    request: pytest.FixtureRequest,
    inner: Run,
    pytester: pytest.Pytester,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fixture, script = of(checked_blocks(request), "python")
    (printed,) = of(checked_blocks(request), "text")
    write(pytester, "test_decoder.py", fixture)
    inner().assert_outcomes(passed=1)

    path = write(pytester, "example.py", script)
    runpy.run_path(str(path), run_name="__main__")
    assert_pasted(printed, capsys.readouterr().out, torch_wording=True)


def test_guard_cost_page(
    request: pytest.FixtureRequest, inner: Run, pytester: pytest.Pytester
) -> None:
    (source,) = of(checked_blocks(request), "python")
    (pasted,) = of(checked_blocks(request), "text")
    write(pytester, "test_model.py", source)
    result = inner()
    # The counts are torch's trees: compared on the release the paste was taken on.
    assert_pasted(pasted, result.stdout.str(), torch_wording=True)
    if version("torch").startswith(PASTED_ON):
        result.assert_outcomes(failed=1, passed=2)
    else:
        assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)


def test_compare(request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/compare.md: each pasted comparison is what the command prints on the reports
    committed beside the page (real runs of the example on two torch releases and a branch)."""
    from pytest_recompile.cli import main

    blocks = of(checked_blocks(request), "console")
    assert len(blocks) == 3
    statuses = []
    for block in blocks:
        (command,) = block.commands
        words = shlex.split(command)
        assert words[:2] == ["pytest-recompile", "compare"], block
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(ROOT)
            statuses.append(main(words[1:]))
        assert capsys.readouterr().out.splitlines() == block.output, f"{block}: stale"
    assert statuses == [0, 1, 1]  # the upgrade is worse on guards only; the branch recompiles


def test_the_certificate_page(
    request: pytest.FixtureRequest, inner: Run, pytester: pytest.Pytester
) -> None:
    """docs/certificate.md: the tied-sizes example passes, gated and not (its assert holds)."""
    (source,) = of(checked_blocks(request), "python")
    write(pytester, "test_tied.py", source)
    inner().assert_outcomes(passed=1)
    result = inner("--recompile-budget=1")  # its warm-up recompiles once
    result.assert_outcomes(failed=1)  # gated, its uncovered seq 1 breaks the gate
    result.stdout.fnmatch_lines(["*would compile again on 1 uncovered of 128 points*seq in {1}*"])


@pytest.mark.inductor
@pytest.mark.processes
@pytest.mark.skipif(
    not version("torch").startswith(PASTED_ON),
    reason="the page's output is pasted from its torch release; the others run the "
    "representative warm-start test (tests/restarts)",
)
def test_the_warm_start_page(
    request: pytest.FixtureRequest, inner: Run, pytester: pytest.Pytester
) -> None:
    """docs/warm-start.md: the process's constant fails the warm start naming the graph's
    line (its two values are the two processes' own), the tensor passes with every hit."""
    failing, fixed = of(checked_blocks(request), "python")
    failure, summary = of(checked_blocks(request), "text")
    write(pytester, "test_restart.py", failing)
    write(pytester, "test_restart_fixed.py", fixed)
    result = inner()
    result.assert_outcomes(passed=1, failed=1)
    lines = [re.sub(r"\d+\.0\b", "*", pattern(line)) for line in failure.output]
    result.stdout.fnmatch_lines(lines)
    result.stdout.fnmatch_lines([pattern(line) for line in summary.output])


@pytest.mark.skipif(
    TORCH_RELEASE < (2, 8), reason="torch.compiler.nested_compile_region is torch 2.8 and newer"
)
def test_the_compile_work_page(
    request: pytest.FixtureRequest, inner: Run, pytester: pytest.Pytester
) -> None:
    """docs/compile-work.md: the stack whose transposed layers split the block fails naming
    the count, the rule and the line; loaded contiguous, it passes."""
    failing, fix, model = of(checked_blocks(request), "python")
    failure, grown = of(checked_blocks(request), "text")
    write(pytester, "test_stack.py", failing)
    result = inner()
    result.assert_outcomes(failed=1)
    assert_pasted(failure, result.stdout.str())
    fixed = re.sub(r"def load_checkpoint.*?\n\n\n", fix.text + "\n\n", failing.text, flags=re.S)
    assert fixed != failing.text
    (pytester.path / "test_stack.py").write_text(fixed)
    inner().assert_outcomes(passed=1)

    (pytester.path / "test_stack.py").unlink()
    write(pytester, "test_model.py", model)
    inner("--recompile-baseline=b.json", "--recompile-baseline-update").assert_outcomes(passed=1)
    refactored = model.text.replace("torch.relu(x @ w)", "torch.relu(x @ w).sin()")
    (pytester.path / "test_model.py").write_text(refactored)
    result = inner("--recompile-baseline=b.json")
    result.assert_outcomes(failed=1)
    assert_pasted(grown, result.stdout.str())
