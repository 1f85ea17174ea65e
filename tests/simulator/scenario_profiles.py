"""What the held-out scenario sets' tests read off a built model: the factor a scenario's time profile puts on
each namespace's rates now, and advancing the model to a given minute; and the held-out sets' benchmark, loaded, and a
set's tiny run of it, checked."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from pulsar_rebalance.simulator.dynamics import ClusterModel

ROOT = Path(__file__).resolve().parents[2]
CRITERIA_KEYS = {"not_worse", "no_hot", "steady", "jitter", "moves"}
"""The balance benchmark's criteria a held-out scenario may declare."""
DAG_STEPS = (15, 60)
"""Where the closed loop's dag cadence puts the model around its second decision: the first plan applied at minute 15
(the approval delay), the second decision at minute 60."""


def factors(model: ClusterModel, field: str = "rate_in") -> dict[str, float]:
    """Per namespace, the factor the scenario's profile puts on its topics' ``field`` now (the shaped rates over the
    base model's: daily cycle, drift and bursts alone)."""
    shaped = {t.name: getattr(t, field) for t in model.topics}
    ClusterModel._update_rates(model)  # the rates without the profile
    plain = {t.name: getattr(t, field) for t in model.topics}
    model._update_rates()
    out: dict[str, set[float]] = {}
    for t in model.topics:
        if plain[t.name] > 0:
            out.setdefault(t.namespace, set()).add(round(shaped[t.name] / plain[t.name], 9))
    assert all(len(v) == 1 for v in out.values()), "a profile is one factor per namespace"
    return {ns: v.pop() for ns, v in out.items()}


def at(model: ClusterModel, minute: int) -> None:
    """Advance ``model`` to simulated ``minute`` (from where it is)."""
    if minute > model.cycle:
        model.advance(minute - model.cycle)


def held_out_bench() -> ModuleType:
    """``benchmarks/bench_held_out_scenarios.py``, loaded as ``benchmarks/figures.py`` loads a script."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import figures

    return figures.load_script("benchmarks/bench_held_out_scenarios.py")


def check_tiny_set_run(
    bench: ModuleType,
    number: int,
    ordinal: str,
    expectations: Mapping[str, Any],
    scenarios: Sequence[str],
    tmp_path: Path,
) -> None:
    """``bench_held_out_scenarios.py --set <number>`` on ``scenarios`` (linear, dag, seed 1; doing nothing and
    ThresholdShedder, never the planner) into ``tmp_path``: the set's own report and JSON only, each scenario with the
    criteria it declared (``expectations``), the report's intro and blocks, the headlines naming the ``ordinal`` set."""
    strategies = ["no-action", "ThresholdShedder"]
    options = f"--set {number} --models linear --cadences dag --seeds 1".split()
    code = bench.main([*options, "--scenarios", *scenarios, "--strategies", *strategies, "--out-dir", str(tmp_path)])
    assert code == 0
    name = f"held-out-scenarios-{number}"
    assert sorted(p.name for p in tmp_path.glob("*.json")) == [f"{name}.json"]  # its own, no other set's
    doc = json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8"))
    report = (tmp_path / f"{name}.md").read_text(encoding="utf-8")
    assert doc["strategies"] == ["ThresholdShedder", "no-action"]
    assert set(doc["results"]["linear"]["dag"]) == set(scenarios)
    assert [spec["name"] for spec in doc["scenarios"]] == sorted(scenarios, key=list(expectations).index)
    for spec in doc["scenarios"]:  # each with the criteria it declared, in the report too
        declared = expectations[spec["name"]]
        assert (spec["criteria"], spec["why"]) == (list(declared.criteria), declared.why)
        assert f"## {spec['name']}" in report
        assert f"{declared.description}; declared: {', '.join(f'*{k}*' for k in declared.criteria)}." in report
    assert report.startswith(f"# Benchmark: held-out scenarios, {ordinal} set")
    assert "First run on: " in report and f"held_out_scenarios_{number}.py" in report
    assert f"<!-- {name}-report:start" in report
    assert "| not_worse | no_hot | steady | jitter | moves |" in report
    headline = bench.render_headline(doc, number)
    assert f"{ordinal} held-out set" in headline and f"[{name}.md]({name}.md)" in headline
    assert f"](docs/benchmarks/{name}.md)" in bench.render_readme(doc, number)
