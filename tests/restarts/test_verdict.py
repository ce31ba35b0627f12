"""The warm-start verdict on a cold and a warm run (pure: what children hand back, as data),
and the reading of torch's cache artifacts."""

from __future__ import annotations

from typing import Any

from pytest_recompile._torch.cache_events import components, event_from
from pytest_recompile.model.budget import WarmStartRule
from pytest_recompile.model.warm_start import (
    SHOWN,
    CacheEvent,
    ChildCompile,
    ChildRun,
    child_run,
    judge,
    worded,
)

GM = "GraphModule()\ndef forward(self, arg0_1):\n    mul = aten.mul(arg0_1, {k});  arg0_1 = None\n"


def event(outcome: str, cache: str = "fx_graph", **changes: Any) -> CacheEvent:
    found: CacheEvent = {
        "cache": cache,
        "outcome": outcome,
        "status": {"miss": "full_miss", "hit": "hit"}.get(outcome),
        "key": "k1",
        "components": {"gm": ["h1", GM.format(k=2.0)], "torch_version": ["tv", "<bytes>"]},
        "reason": None,
        "guard_expr": None,
        "compile": "0/0",
        "function": "scaled",
        "file": "/repo/tests/test_m.py",
        "line": 7,
    }
    found.update(changes)  # type: ignore[typeddict-item]
    return found


def compiled(inductor: bool = True, function: str = "scaled") -> ChildCompile:
    return {"compile": "0/0", "function": function, "file": "/repo/m.py", "line": 3,
            "inductor": inductor}  # fmt: skip


def ran(*events: CacheEvent, compiles: int = 1, **changes: Any) -> ChildRun:
    found = child_run("passed", seconds=2.0)
    found["events"] = list(events)
    found["compiles"] = [compiled() for _ in range(compiles)]
    found["components_named"] = any(e["components"] for e in events)
    found["versions"] = {"torch": "2.13.0", "triton": None, "python": "3.11.9"}
    found.update(changes)  # type: ignore[typeddict-item]
    return found


RULE = WarmStartRule()


def test_every_lookup_hit_passes_with_the_saving() -> None:
    result = judge(ran(event("miss")), ran(event("hit")), RULE)
    assert result["status"] == "passed"
    assert result["message"] is None
    assert (result["lookups"], result["hits"]) == (1, 1)
    assert worded(result) == "cold 2.0 s, warm 2.0 s; warm lookups 1, hits 1"


def test_a_miss_names_the_component_whose_hash_moved() -> None:
    warm = event("miss", key="k2", components={
        "gm": ["h2", GM.format(k=3.0)], "torch_version": ["tv", "<bytes>"],
        "cpp_runtime_thread_count": ["t2", "4"]})  # fmt: skip
    result = judge(ran(event("miss")), ran(warm), RULE, root="/repo")
    assert result["status"] == "failed"
    message = result["message"] or ""
    assert "FX graph cache of scaled (tests/test_m.py:7): miss: the key changed:" in message
    assert "gm (the graph): mul = aten.mul(arg0_1, 2.0); arg0_1 = None -> " in message
    assert "cpp_runtime_thread_count only in the warm run" in message
    assert "torch_version" not in message  # same hash: not named
    assert (result["function"], result["line"]) == ("scaled", 7)


def test_an_option_component_shows_both_values() -> None:
    cold = event("miss", components={"inductor_config[size_asserts]": ["a", "True"]})
    warm = event("miss", key="k2", components={"inductor_config[size_asserts]": ["b", "False"]})
    message = judge(ran(cold), ran(warm), RULE)["message"] or ""
    assert "inductor_config[size_asserts]: True -> False" in message


def test_autograd_config_is_named_by_the_functorch_option() -> None:
    cold = event("miss", "aot_autograd", components={"autograd_config": ["a", "<pickle>"]})
    warm = event("miss", "aot_autograd", key="k2",
                 components={"autograd_config": ["b", "<pickle>"]})  # fmt: skip
    before = ran(cold, functorch_config={"debug_assert": "False", "other": "1"})
    after = ran(warm, functorch_config={"debug_assert": "True", "other": "1"})
    message = judge(before, after, RULE)["message"] or ""
    assert "autograd_config: torch._functorch.config.debug_assert: False -> True" in message


def test_the_same_key_a_cold_forward_never_saved_is_explained() -> None:
    cold, warm = event("miss", "aot_autograd"), event("miss", "aot_autograd")
    unsaved = ran(cold, counters={"aot_autograd": {"misses": 1, "saved": 0}})
    message = judge(unsaved, ran(warm), RULE)["message"] or ""
    assert "a forward compiled in grad mode whose backward never ran" in message
    assert "torch.no_grad() or torch.inference_mode()" in message
    saved = ran(cold, counters={"aot_autograd": {"misses": 1, "saved": 1}})
    message = judge(saved, ran(warm), RULE)["message"] or ""
    assert "the same key as the cold run, but its entry was not found (not saved)" in message
    keyless = event("miss", "aot_autograd", key=None)
    message = judge(ran(keyless), ran(keyless), RULE)["message"] or ""
    assert "same key" not in message


def test_a_bypass_only_torch_s_counters_saw_is_judged() -> None:
    counted = {"aot_autograd": {"bypasses": 1}}
    warm = ran(event("hit"), counters=counted)
    result = judge(ran(event("miss")), warm, RULE)
    assert result["status"] == "failed"
    assert "1 bypass torch counted without describing it (an entry torch could not save)" in (
        result["message"] or ""
    )
    allowed = judge(ran(event("miss")), warm, WarmStartRule(allow_bypass=True))
    assert allowed["status"] == "passed"


def test_a_child_that_skipped_or_a_capture_that_failed_checks_nothing() -> None:
    skipped = child_run("skipped", "Skipped: needs a GPU")
    result = judge(skipped, child_run("not run"), RULE)
    assert result["status"] == "skipped"
    assert result["message"] == (
        "not checked: the test skipped itself in the cold run (Skipped: needs a GPU)"
    )
    broken = ran(event("miss"), problems=["the capture could not start in the child: boom"])
    result = judge(broken, ran(event("hit")), RULE)
    assert result["status"] == "skipped"  # the plugin's fault never fails the test
    assert "the capture could not start in the child: boom (the cold run)" in (
        result["message"] or ""
    )


def test_a_guard_miss_shows_torch_s_guard_expression() -> None:
    warm = event("miss", status="guard_miss", guard_expr="Eq(s0, 8)")
    message = judge(ran(event("miss")), ran(warm), RULE)["message"] or ""
    assert "an entry with this key exists but its guards failed: Eq(s0, 8)" in message
    assert judge(ran(event("miss")), ran(warm), RULE)["warm"]["guard_misses"] == 1  # type: ignore[index]


def test_a_compile_the_cold_run_did_not_make() -> None:
    warm = event("miss", compile="1/0")
    message = judge(ran(event("miss")), ran(warm), RULE)["message"] or ""
    assert "the cold run made no such compile" in message


def test_a_bypass_fails_unless_allowed_and_is_shown_either_way() -> None:
    reason = "Cannot cache a graph with freezing enabled"
    bypass = event("bypass", "aot_autograd", reason=reason)
    both = (ran(bypass, event("miss")), ran(bypass, event("hit")))
    failed = judge(*both, RULE)
    assert failed["status"] == "failed"
    assert f"bypassed: {reason}; every start compiles it again" in (failed["message"] or "")
    allowed = judge(*both, WarmStartRule(allow_bypass=True))
    assert allowed["status"] == "passed"
    assert any(
        reason in note and "@warm_start(allow_bypass=True)" in note for note in allowed["notes"]
    )


def test_no_lookup_is_never_a_pass() -> None:
    eager = ran(compiles=0)
    eager["compiles"] = [compiled(inductor=False)]
    said = judge(eager, eager, RULE)["message"] or ""
    assert "scaled compiled with a backend that has no cache (eager" in said
    off = ran(caches_off=["TORCHINDUCTOR_FORCE_DISABLE_CACHES=1"])
    said = judge(off, off, RULE)["message"] or ""
    assert "the caches are switched off (TORCHINDUCTOR_FORCE_DISABLE_CACHES=1)" in said
    nothing = ran(compiles=0)
    assert "compiled nothing in either run" in (judge(nothing, nothing, RULE)["message"] or "")


def test_counters_alone_decide_where_torch_names_no_components() -> None:
    cold = ran(counters={"fx_graph": {"misses": 1}})
    warm = ran(counters={"fx_graph": {"misses": 1}})
    result = judge(cold, warm, RULE)
    assert result["status"] == "failed"
    assert "1 cache miss torch counted without describing it (an entry whose" in (
        result["message"] or ""
    )
    assert "torch that describes none: torch 2.13.0)" in (result["message"] or "")
    assert any("does not name the key's components" in n for n in result["notes"])


def test_dynamo_requires_a_warm_run_that_traces_nothing() -> None:
    rule = WarmStartRule(dynamo=True)
    loaded = judge(ran(event("miss")), ran(compiles=0), rule)
    assert loaded["status"] == "passed"  # precompiled: no Dynamo, no lookup
    traced = judge(ran(event("miss")), ran(event("hit")), rule)
    assert traced["status"] == "failed"
    assert "Dynamo traced 1 frame in the warm run (scaled (/repo/m.py:3))" in (
        traced["message"] or ""
    )


def test_a_child_without_a_verdict_is_an_error_with_its_own_error() -> None:
    for outcome, said in [
        ("failed", "the test failed"),
        ("crashed", "the process crashed"),
        ("timed out", "the process ran past the time limit"),
    ]:
        broken = child_run(outcome, "Traceback...\nValueError: boom")
        result = judge(broken, child_run("not run"), RULE)
        assert result["status"] == "error"
        assert f"the cold run of the warm-start check ({said}, in a fresh process)" in (
            result["message"] or ""
        )
        assert "ValueError: boom" in (result["message"] or "")


def test_many_misses_are_counted_past_the_first_few() -> None:
    colds = [event("miss", compile=f"{i}/0") for i in range(SHOWN + 3)]
    warms = [event("miss", compile=f"{i}/0", key="k9") for i in range(SHOWN + 3)]
    message = judge(ran(*colds), ran(*warms), RULE)["message"] or ""
    assert message.count(": miss:") == SHOWN
    assert message.endswith("and 3 more misses")


def test_torch_s_artifacts_read_into_events() -> None:
    lines = ["[abc] gm: GraphModule()\ndef forward(self):\n    pass", "[def] fx_kwargs[x]: 1"]
    assert components(lines) == {
        "gm": ["abc", "GraphModule()\ndef forward(self):\n    pass"],
        "fx_kwargs[x]": ["def", "1"],
    }
    new = event_from("aotautograd_cache_bypass", {"cache_bypass_reason": "why"}, "2/0")
    assert new is not None
    assert (new["cache"], new["outcome"], new["reason"], new["compile"]) == (
        "aot_autograd", "bypass", "why", "2/0")  # fmt: skip
    old = event_from("fx_graph_cache_hash", {"cache_state": "hit", "key": "k"}, "0/0")
    assert old is not None
    assert (old["cache"], old["outcome"], old["key"]) == ("fx_graph", "hit", "k")
    assert event_from("inductor_output_code", {}, "0/0") is None


def test_two_long_values_read_apart_where_they_differ() -> None:
    prefix = "(0, True, [DictGetItemSource(base=LocalSource(local_name='self'), index='scale_"
    cold = event("miss", "aot_autograd", components={"aot_config": ["a", prefix + "1401')])"]})
    warm = event("miss", "aot_autograd", key="k2",
                 components={"aot_config": ["b", prefix + "9907')])"]})  # fmt: skip
    message = judge(ran(cold), ran(warm), RULE)["message"] or ""
    assert "aot_config: ...e='self'), index='scale_1401')]) -> " in message
    assert " -> ...e='self'), index='scale_9907')])" in message


def test_a_child_reads_none_of_the_user_s_output_options() -> None:
    """An option left unset falls back to its ini twin: the child is told the outputs and
    addopts in -o, after the user's own, and takes no option that would select, spread,
    fork or write."""
    import pickle

    from pytest_recompile.restarts.parent import _arguments, _taken

    options = {
        "plugins": ["recompile", "no:randomly"],
        "override_ini": ["recompile_report=mine.json"],
        "log_file": "run.log",
        "inifilename": "setup.cfg",
        "numprocesses": 2,
        "dist": "load",
        "xmlpath": "junit.xml",
        "recompile_report": "report.json",
        "keyword": "slow",
        "runslow": True,  # a conftest's own option: taken
    }
    args = _arguments(options)
    assert args[:6] == ["-p", "recompile", "-p", "no:randomly", "-p", "no:cacheprovider"]
    assert args[args.index("-c") + 1] == "setup.cfg"
    overrides = [args[i + 1] for i, a in enumerate(args) if a == "-o"]
    assert overrides[0] == "recompile_report=mine.json"
    assert overrides.index("recompile_report=") > 0  # the last one given wins
    assert {"addopts=", "log_file=", "recompile_trace=", "recompile_mode=report-only"} <= set(
        overrides
    )
    taken = pickle.loads(_taken(options))
    assert taken["runslow"] is True
    assert (taken["numprocesses"], taken["dist"], taken["xmlpath"]) == (None, "no", None)
    assert (taken["keyword"], taken["recompile_report"]) == ("", None)
    assert "plugins" not in taken
