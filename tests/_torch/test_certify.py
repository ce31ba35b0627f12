"""The shape certificate against its yardstick: for every kind of function below, each point of
the domain is certified from the entries' guards, then called for real under
``set_stance("fail_on_recompile")`` after the same warm-up; the two must agree point for point,
and a point the guards cannot decide is undecided, never covered."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
import torch._dynamo

from pytest_recompile import RecompileTracker, Size
from pytest_recompile._torch import versions
from pytest_recompile._torch.certify import CertificateError, certify
from pytest_recompile.model.certificate import DomainError

mark_dynamic = torch._dynamo.mark_dynamic
mark_unbacked = getattr(torch._dynamo.decorators, "mark_unbacked", None)
maybe_mark_dynamic = torch._dynamo.maybe_mark_dynamic


@dataclass
class Case:
    """A function, how it is warmed up, the example call and the domain; ``mark`` is applied
    to every tensor the yardstick builds (the example's marks, as a user sets them)."""

    fn: Callable[..., Any]
    warm: list[dict[str, Any]]  # each: {param: (sizes, dtype) or value}
    example: dict[str, Any]
    domain: dict[str, Any]
    mark: Callable[[str, torch.Tensor], None] = lambda name, t: None
    breaks: bool = False  # a graph break: points may be undecided (never covered wrongly)
    params: tuple[str, ...] = ()  # the call's parameter order (positional)
    mark_warm_up: bool = True  # False: the warm-up's tensors go unmarked (only the points')
    config: dict[str, Any] = field(default_factory=dict)


def tensor(spec: Any, name: str, case: Case, *, warming: bool = False) -> Any:
    if not isinstance(spec, tuple):
        return spec
    sizes, dtype = spec
    made = torch.zeros(sizes, dtype=dtype)
    if case.mark_warm_up or not warming:
        case.mark(name, made)
    return made


def call_args(case: Case, values: dict[str, Any], *, warming: bool = False) -> tuple[Any, ...]:
    return tuple(tensor(values[name], name, case, warming=warming) for name in case.params)


def point_values(case: Case, point: dict[str, Any]) -> dict[str, Any]:
    values = dict(case.example)
    for name, change in point.items():
        if isinstance(change, dict):
            sizes, dtype = values[name]
            sizes = list(sizes)
            for dim, size in change.items():
                if dim == "dtype":
                    dtype = size
                else:
                    sizes[dim] = size
            values[name] = (tuple(sizes), dtype)
        else:
            values[name] = change
    return values


def points(case: Case) -> list[dict[str, Any]]:
    """Every point of the domain, as the certificate names them (its own enumeration is the
    thing under test: this one is written out here)."""
    import itertools

    axes: list[tuple[Any, list[tuple[str, Any]]]] = []
    for name, spec in case.domain.items():
        items = spec.items() if isinstance(spec, dict) else [(None, spec)]
        for dim, values in items:
            for axis in axes:
                if axis[0] is values and isinstance(values, Size):
                    axis[1].append((name, dim))
                    break
            else:
                axes.append((values, [(name, dim)]))
    found = []
    for combo in itertools.product(
        *(list(v.values if isinstance(v, Size) else v) for v, _ in axes)
    ):
        point: dict[str, Any] = {}
        for value, (_, places) in zip(combo, axes, strict=False):
            for name, dim in places:
                if dim is None:
                    point[name] = value
                else:
                    point.setdefault(name, {})[dim] = value
        found.append(point)
    return found


def recompiles_at(case: Case, point: dict[str, Any]) -> bool:
    args = call_args(case, point_values(case, point))
    try:
        with torch.compiler.set_stance("fail_on_recompile"):
            case.fn(*args)
    except RuntimeError as exc:
        if "recompil" not in str(exc).lower():
            raise
        return True
    return False


F32 = torch.float32


def _linear() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Linear(16, 4)


class Head(torch.nn.Module):
    """A model of the user's own (torch skips its own modules' frames under module.compile())."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = _linear()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).relu()


class Scaled:
    """A callable object, as serving code wraps a model."""

    def __init__(self) -> None:
        self.scale = 2.0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale + 1


def decorated(forward: Callable[..., Any]) -> Callable[..., Any]:
    """transformers' pattern: the forward runs inside ``wrapper(self, *args, **kwargs)``."""

    @functools.wraps(forward)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        return forward(self, *args, **kwargs)

    return wrapper


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(32, 8)
        self.register_buffer("positions", torch.zeros(64, 8))

    @decorated
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        seq = input_ids.shape[1]
        h = self.embed(input_ids) + self.positions[:seq]
        return h * attention_mask.unsqueeze(-1)


def cases() -> dict[str, Callable[[], Case]]:
    eager = functools.partial(torch.compile, backend="eager")
    sizes = range(0, 12)
    found: dict[str, Callable[[], Case]] = {}

    def add(fn: Callable[[], Case]) -> Callable[[], Case]:
        found[fn.__name__] = fn
        return fn

    @add
    def static_entry() -> Case:
        f = eager(lambda x: x.sin(), dynamic=False)
        return Case(f, [{"x": ((4, 3), F32)}, {"x": ((5, 3), F32)}], {"x": ((4, 3), F32)},
                    {"x": {0: sizes, 1: [3, 4]}}, params=("x",))  # fmt: skip

    @add
    def automatic_dynamic() -> Case:
        f = eager(lambda x: x.cos() + 1)
        return Case(f, [{"x": ((8, 3), F32)}, {"x": ((9, 3), F32)}], {"x": ((8, 3), F32)},
                    {"x": {0: sizes}}, params=("x",))  # fmt: skip

    @add
    def no_automatic_dynamic() -> Case:
        f = eager(lambda x: x.cos() + 1)
        return Case(f, [{"x": ((8, 3), F32)}, {"x": ((9, 3), F32)}], {"x": ((8, 3), F32)},
                    {"x": {0: sizes}}, params=("x",),
                    config={"automatic_dynamic_shapes": False})  # fmt: skip

    @add
    def marked_dynamic() -> Case:
        f = eager(lambda x: x * 2)
        return Case(f, [{"x": ((8, 3), F32)}], {"x": ((8, 3), F32)}, {"x": {0: sizes}},
                    mark=lambda n, t: mark_dynamic(t, 0), params=("x",))  # fmt: skip

    @add
    def marked_dynamic_bounded() -> Case:
        f = eager(lambda x: x * 2)
        return Case(f, [{"x": ((5, 3), F32)}], {"x": ((5, 3), F32)}, {"x": {0: sizes}},
                    mark=lambda n, t: mark_dynamic(t, 0, min=3, max=9), params=("x",))  # fmt: skip

    @add
    def maybe_marked() -> Case:
        f = eager(lambda x: x * 2)
        return Case(f, [{"x": ((8, 3), F32)}], {"x": ((8, 3), F32)}, {"x": {0: sizes}},
                    mark=lambda n, t: maybe_mark_dynamic(t, 0), params=("x",))  # fmt: skip

    if mark_unbacked is not None:

        @add
        def unbacked() -> Case:
            f = eager(lambda x: x * 2)
            return Case(f, [{"x": ((8, 3), F32)}], {"x": ((8, 3), F32)}, {"x": {0: sizes}},
                        mark=lambda n, t: mark_unbacked(t, 0), params=("x",))  # fmt: skip

    @add
    def one_call_static() -> Case:
        f = eager(lambda x: x * 2)
        return Case(f, [{"x": ((8, 3), F32)}], {"x": ((8, 3), F32)}, {"x": {0: [7, 8, 9]}},
                    params=("x",))  # fmt: skip

    @add
    def unmarked_entry_marked_call() -> Case:
        # the entries were compiled from unmarked tensors: a marked call compiles again, even
        # at a size they serve
        f = eager(lambda x: x * 2)
        return Case(f, [{"x": ((8, 3), F32)}, {"x": ((9, 3), F32)}], {"x": ((8, 3), F32)},
                    {"x": {0: [1, 8, 9, 10]}}, mark=lambda n, t: mark_dynamic(t, 0),
                    mark_warm_up=False, params=("x",))  # fmt: skip

    @add
    def branch_on_size() -> Case:
        def f(x: torch.Tensor) -> torch.Tensor:
            if x.shape[0] == 6:
                return x + 1
            return x - 1

        return Case(eager(f), [{"x": ((8, 3), F32)}, {"x": ((9, 3), F32)}], {"x": ((8, 3), F32)},
                    {"x": {0: sizes}}, params=("x",))  # fmt: skip

    @add
    def divisible_view() -> Case:
        f = eager(lambda x: x.reshape(-1, 4).sum(0))
        return Case(f, [{"x": ((8, 6), F32)}, {"x": ((10, 6), F32)}], {"x": ((8, 6), F32)},
                    {"x": {0: range(0, 14)}}, params=("x",))  # fmt: skip

    @add
    def python_int() -> Case:
        f = eager(lambda x, n: x * n)
        return Case(f, [{"x": ((4,), F32), "n": 2}], {"x": ((4,), F32), "n": 2},
                    {"n": [-1, 0, 1, 2, 3, 7]}, params=("x", "n"))  # fmt: skip

    @add
    def python_int_seen_twice() -> Case:
        f = eager(lambda x, n: x * n)
        return Case(f, [{"x": ((4,), F32), "n": 2}, {"x": ((4,), F32), "n": 3}],
                    {"x": ((4,), F32), "n": 2}, {"n": [-1, 0, 1, 2, 5, 100]},
                    params=("x", "n"))  # fmt: skip

    @add
    def python_int_dynamic_true() -> Case:
        f = eager(lambda x, n: x * n, dynamic=True)
        return Case(f, [{"x": ((4,), F32), "n": 2}], {"x": ((4,), F32), "n": 2},
                    {"n": [-1, 0, 1, 2, 9], "x": {0: [0, 1, 2, 5]}}, params=("x", "n"))  # fmt: skip

    @add
    def static_dim_dynamic_true() -> Case:
        f = eager(lambda x: x + 1, dynamic=True)
        return Case(f, [{"x": ((4, 3), F32)}], {"x": ((4, 3), F32)},
                    {"x": {0: [2, 4, 5], 1: [2, 3, 7]}},
                    mark=lambda n, t: torch._dynamo.mark_static(t, 0), params=("x",))  # fmt: skip

    @add
    def python_float() -> Case:
        f = eager(lambda x, s: x * s)
        return Case(f, [{"x": ((4,), F32), "s": 0.5}], {"x": ((4,), F32), "s": 0.5},
                    {"s": [0.5, 0.25, 2.0]}, params=("x", "s"))  # fmt: skip

    @add
    def python_float_seen_twice() -> Case:
        f = eager(lambda x, s: x * s)
        return Case(f, [{"x": ((4,), F32), "s": 0.5}, {"x": ((4,), F32), "s": 0.25}],
                    {"x": ((4,), F32), "s": 0.5}, {"s": [0.5, 0.1, 3.0, -2.0]},
                    params=("x", "s"))  # fmt: skip

    @add
    def broadcasting_untied() -> Case:
        f = eager(lambda x, y: x + y)
        return Case(f, [{"x": ((6, 3), F32), "y": ((6, 3), F32)},
                        {"x": ((7, 3), F32), "y": ((7, 3), F32)}],
                    {"x": ((6, 3), F32), "y": ((6, 3), F32)}, {"x": {0: [6, 8]}},
                    params=("x", "y"))  # fmt: skip

    @add
    def broadcasting_tied() -> Case:
        f = eager(lambda x, y: x + y)
        batch = Size(range(0, 10), "batch")
        return Case(f, [{"x": ((6, 3), F32), "y": ((6, 3), F32)},
                        {"x": ((7, 3), F32), "y": ((7, 3), F32)}],
                    {"x": ((6, 3), F32), "y": ((6, 3), F32)},
                    {"x": {0: batch}, "y": {0: batch}}, params=("x", "y"))  # fmt: skip

    @add
    def module_fixed_weights() -> Case:
        m = eager(_linear())
        return Case(m, [{"input": ((8, 16), F32)}, {"input": ((9, 16), F32)}],
                    {"input": ((8, 16), F32)}, {"input": {0: [1, 2, 8, 40], 1: [16, 15]}},
                    params=("input",))  # fmt: skip

    @add
    def module_compile_method() -> Case:
        m = Head()
        m.compile(backend="eager")
        return Case(m, [{"x": ((8, 16), F32)}, {"x": ((9, 16), F32)}],
                    {"x": ((8, 16), F32)}, {"x": {0: [0, 1, 3, 33], 1: [16, 8]}},
                    params=("x",))  # fmt: skip

    @add
    def dtype_domain() -> Case:
        f = eager(lambda x: x * 2)
        return Case(f, [{"x": ((8, 3), F32)}, {"x": ((8, 3), torch.float64)}],
                    {"x": ((8, 3), F32)},
                    {"x": {0: [1, 8], "dtype": [F32, torch.float64, torch.bfloat16]}},
                    params=("x",))  # fmt: skip

    @add
    def partial_of_compiled() -> Case:
        f = eager(lambda x, n: x * n)
        return Case(functools.partial(f, n=3), [{"x": ((8, 3), F32)}, {"x": ((9, 3), F32)}],
                    {"x": ((8, 3), F32)}, {"x": {0: [0, 1, 2, 30]}}, params=("x",))  # fmt: skip

    @add
    def compiled_method() -> Case:
        m = _linear()
        return Case(eager(m.forward), [{"input": ((8, 16), F32)}, {"input": ((9, 16), F32)}],
                    {"input": ((8, 16), F32)}, {"input": {0: [1, 2, 7]}},
                    params=("input",))  # fmt: skip

    @add
    def callable_object() -> Case:
        return Case(eager(Scaled()), [{"x": ((8,), F32)}, {"x": ((9,), F32)}],
                    {"x": ((8,), F32)}, {"x": {0: [0, 1, 4, 100]}}, params=("x",))  # fmt: skip

    @add
    def decorated_forward() -> Case:
        torch.manual_seed(0)
        m = eager(Tiny())
        seq = Size(range(0, 70, 3), "seq")
        long = torch.int64
        return Case(m, [{"input_ids": ((2, 16), long), "attention_mask": ((2, 16), F32)},
                        {"input_ids": ((2, 17), long), "attention_mask": ((2, 17), F32)}],
                    {"input_ids": ((2, 16), long), "attention_mask": ((2, 16), F32)},
                    {"input_ids": {1: seq}, "attention_mask": {1: seq}},
                    params=("input_ids", "attention_mask"))  # fmt: skip

    @add
    def graph_break() -> Case:
        def f(x: torch.Tensor) -> torch.Tensor:
            y = x + 1
            torch._dynamo.graph_break()
            return y * 2

        return Case(eager(f), [{"x": ((8, 3), F32)}, {"x": ((9, 3), F32)}], {"x": ((8, 3), F32)},
                    {"x": {0: [0, 1, 4, 20]}}, breaks=True, params=("x",))  # fmt: skip

    return found


CASES = cases()


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _warm(case: Case) -> tuple[Any, ...]:
    for values in case.warm:
        case.fn(*call_args(case, {**case.example, **values}, warming=True))
    return call_args(case, case.example)


@pytest.mark.parametrize("name", list(CASES))
def test_the_certificate_agrees_with_fail_on_recompile(name: str) -> None:
    case = CASES[name]()
    with torch._dynamo.config.patch(**case.config):
        example = _warm(case)
        result = certify(case.fn, example, case.domain)
        uncovered = list(result.uncovered)
        undecided = list(result.undecided)
        disagree = []
        for point in points(case):
            truth = recompiles_at(case, point)
            said = (
                "uncovered"
                if point in uncovered
                else "undecided"
                if point in undecided
                else "covered"
            )
            if said == "undecided" and case.breaks:
                continue  # past a graph break: it says it does not know
            if (said == "uncovered") != truth or said == "undecided":
                disagree.append((point, said, truth))
    assert not disagree, f"{name}: {disagree}\n{result.message()}"
    assert result.points == len(points(case))
    if case.breaks:
        assert result.undecided, "a graph break leaves points it cannot decide"


# Cases whose whole domain is served by what the warm-up compiled (torch says so as well).
ALL_COVERED = {"unbacked", "python_int_seen_twice", "python_float_seen_twice"}
# Cases none of whose points is served (torch guards that the mark is absent).
ALL_UNCOVERED = {"unmarked_entry_marked_call"}


def test_the_cases_cover_what_decides_real_shapes() -> None:
    """A case certifying all or nothing would test little: every case but those meant to be
    covered whole finds points both ways (the graph break: uncovered and undecided)."""
    found = {}
    for name, make in CASES.items():
        torch._dynamo.reset()
        case = make()
        with torch._dynamo.config.patch(**case.config):
            result = certify(case.fn, _warm(case), case.domain)
        if result.covered:
            found[name] = "covered"
        elif case.breaks:
            found[name] = "broken" if result.uncovered and result.undecided else "dull"
        else:
            found[name] = "dull" if len(result.uncovered) == result.points else "mixed"
    assert {n for n, v in found.items() if v == "covered"} == ALL_COVERED & set(CASES)
    assert {n for n, v in found.items() if v == "dull"} == ALL_UNCOVERED, found


def test_covers_compiles_nothing() -> None:
    """No compile, no call of the user's code, no entry touched, torch's counters unchanged."""
    import copy

    from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

    def f(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    compiled = torch.compile(f, backend="eager")
    compiled(torch.randn(8, 3))
    compiled(torch.randn(9, 3))
    before = (
        copy.deepcopy(dict(torch._dynamo.utils.counters)),
        [e.guard_manager for e in _debug_get_cache_entry_list(f.__code__)],
        len(torch._dynamo.utils.get_compilation_metrics()),
    )
    result = certify(compiled, (torch.randn(8, 3),), {"x": {0: range(0, 2000)}})
    after = (
        copy.deepcopy(dict(torch._dynamo.utils.counters)),
        [e.guard_manager for e in _debug_get_cache_entry_list(f.__code__)],
        len(torch._dynamo.utils.get_compilation_metrics()),
    )
    assert before == after
    assert [p["x"][0] for p in result.uncovered] == [0, 1]


def test_the_result_names_points_by_the_domains_keys() -> None:
    f = torch.compile(lambda x, n: x * n, backend="eager")
    f(torch.randn(8, 3), 2)
    result = certify(
        f, (torch.randn(8, 3), 2), {"x": {0: [8], "dtype": [F32, torch.bfloat16]}, "n": [2, 3]}
    )
    assert {"x": {0: 8, "dtype": torch.bfloat16}, "n": 3} in result.uncovered
    assert {"x": {0: 8, "dtype": F32}, "n": 2} not in result.uncovered
    assert not result.covered
    assert not result.undecided
    assert "n not in {2}" in result.message() or "n in {3}" in result.message()


def test_the_message_groups_points_into_ranges() -> None:
    f = torch.compile(lambda x: x * 2, backend="eager")
    x = torch.randn(8, 3)
    mark_dynamic(x, 0, min=2, max=4096)
    f(x)
    result = certify(f, (x,), {"x": {0: range(0, 6000, 1)}})
    text = result.message()
    assert "x.size(0) in {0, 1} or > 4096 [" in text, text
    assert "fix:" in text


@pytest.mark.parametrize(
    ("args", "domain", "words"),
    [
        ((torch.randn(8, 3),), {"y": {0: [1]}}, "not a parameter of the call (its parameters: x)"),
        ((torch.randn(8, 3),), {"x": [1, 2]}, "'x' is a tensor: its spec is {dim: sizes}"),
        ((torch.randn(8, 3),), {"x": {2: [1]}}, "a dim is an int in [-2, 1]"),
        ((torch.randn(8, 3),), {"x": {0: [-1]}}, "a size is an int >= 0"),
        ((torch.randn(8, 3),), {"x": {0: []}}, "is empty"),
        ((torch.randn(8, 3),), {}, "domain must be a non-empty"),
        (torch.randn(8, 3), {"x": {0: [1]}}, "a single argument: (x,)"),
    ],
)
def test_a_bad_domain_says_what_is_accepted(args: Any, domain: Any, words: str) -> None:
    f = torch.compile(lambda x: x * 2, backend="eager")
    f(torch.randn(8, 3))
    with pytest.raises(DomainError) as raised:
        certify(f, args, domain)
    assert words in str(raised.value)


def test_nothing_compiled_is_an_error_not_a_certificate() -> None:
    f = torch.compile(lambda x: x * 2, backend="eager")
    with pytest.raises(CertificateError, match="has no cache entries: call it"):
        certify(f, (torch.randn(8, 3),), {"x": {0: [1]}})


def test_the_tracker_holds_an_ungated_result_to_assert_on() -> None:
    with RecompileTracker(mode="report-only") as tracker:
        f = torch.compile(lambda x: x * 2, backend="eager")
        f(torch.randn(8, 3))
        f(torch.randn(9, 3))
        result = tracker.covers(f, (torch.randn(8, 3),), {"x": {0: range(1, 9)}})
    assert result.uncovered == [{"x": {0: 1}}]
    assert tracker.violations() == []  # no budget: nothing to break


def test_a_gated_tracker_breaks_on_an_uncovered_point() -> None:
    with RecompileTracker(max_recompiles=5, mode="report-only") as tracker:
        f = torch.compile(lambda x: x * 2, backend="eager")
        f(torch.randn(8, 3))
        f(torch.randn(9, 3))
        tracker.covers(f, (torch.randn(8, 3),), {"x": {0: range(1, 9)}})
    (found,) = tracker.violations()
    assert found.kind == "uncovered"
    assert found.used == 1
    assert found.source.startswith("covers() at tests/_torch/test_certify.py:")


def test_every_release_has_what_the_certificate_reads() -> None:
    assert versions.can_certify()


def test_no_stand_in_outlives_the_certificate() -> None:
    """Stand-ins are made one point at a time and dropped: none is left when it returns."""
    import gc

    f = torch.compile(lambda x: x * 2, backend="eager")
    f(torch.randn(8, 3))
    f(torch.randn(9, 3))
    certify(f, (torch.randn(8, 3),), {"x": {0: range(12340, 12350)}})
    gc.collect()
    left = []
    for o in gc.get_objects():
        try:  # (a dead weak proxy among the objects raises on any question)
            plain = type(o) is torch.Tensor
        except ReferenceError:
            continue
        if plain and o.dim() == 2 and 12340 <= o.shape[0] < 12350:
            left.append(o)
    assert left == []
