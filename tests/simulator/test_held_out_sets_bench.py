"""The benchmark runs each held-out set apart (``bench_balance.py --held-out K``), one test parametrised over the sets
from the second on (the first set's own test is in test_held_out_models.py): its models, the module they live in,
the report file and block it writes, the usages its report states, and refusing a set mixed with ``--models``."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]

SETS = {
    "2": ("held_out_models.py", ("tls-crypto", "bookie-backpressure")),
    "3": ("held_out_models_3.py", ("catch-up-reads", "gc-pressure")),
    "4": ("held_out_models_4.py", ("topic-features", "bundle-housekeeping")),
    "5": ("held_out_models_5.py", ("batching-concave", "cold-arrival")),
    "6": ("held_out_models_6.py", ("shared-hosts", "cold-start")),
    "7": ("held_out_models_7.py", ("smt-knee", "offload-bursts")),
    "8": ("held_out_models_8.py", ("geo-replication", "bookie-writes")),
    "9": ("held_out_models_9.py", ("key-shared", "entry-filters")),
}
"""Every held-out set after the first: the module under ``simulator/`` its models live in, and their names (written out
here, so that a set renamed, moved or dropped in the benchmark fails this test)."""
ARGS = ["--quick", "--scenarios", "steady-with-noise", "--cadences", "minute", "--strategies", "no-action"]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import figures

    return figures.load_script("benchmarks/bench_balance.py")


def test_every_held_out_set_is_listed_here(bench: ModuleType) -> None:
    assert list(bench.HELD_OUT_SETS) == ["1", *SETS]
    assert set(bench.HELD_OUT_USAGES) == set(bench.HELD_OUT_SETS)
    assert set(bench.HELD_OUT_SET_OF_BLOCK) <= set(bench.BLOCKS)
    # the first two sets keep the names their stored reports have; from the third on a set has a module of its own
    assert bench.HELD_OUT_OUTPUTS["1"] == (bench.HELD_OUT_JSON, bench.HELD_OUT_TARGETS)
    assert bench.HELD_OUT_JSON.name == "balance-held-out.json"
    assert bench.HELD_OUT_SET_OF_BLOCK["balance-held-out-report"] == "1"
    assert set(bench.OWN_MODULE_SETS) == {key for key, (module, _) in SETS.items() if module != "held_out_models.py"}
    with pytest.raises(SystemExit):
        bench.main(["--held-out", "99"])  # no such set: refused before anything runs


# from the fourth on: the third set's module adds its names to the simulator's registry (cluster.known_load_models)
@pytest.mark.parametrize("key", [key for key in SETS if int(key) >= 4])
def test_a_set_in_a_module_of_its_own_is_in_no_registry(key: str, bench: ModuleType) -> None:
    """Every module a stored run imported stays as it was: a set from the fourth on is in no registry (nor shares a name
    with another set), and its models go in as instances, one per cluster."""
    from pulsar_rebalance.simulator import held_out_models
    from pulsar_rebalance.simulator.cluster import known_load_models
    from pulsar_rebalance.simulator.load_models import LOAD_MODELS, get_load_model
    from pulsar_rebalance.simulator.scenarios import build

    module, models = SETS[key]
    mod = importlib.import_module(f"pulsar_rebalance.simulator.{module.removesuffix('.py')}")
    assert getattr(mod, f"HELD_OUT_MODELS_{key}") == models
    assert held_out_models.HELD_OUT_SETS == {
        "1": held_out_models.HELD_OUT_MODELS,
        "2": held_out_models.HELD_OUT_MODELS_2,
    }
    others = {name for k, (_, ms) in bench.OWN_MODULE_SETS.items() if k != key for name in ms}
    registered = {*LOAD_MODELS, *held_out_models.HELD_OUT_LOAD_MODELS, *known_load_models(), *others}
    assert not set(models) & registered
    for name, model in bench.OWN_MODULE_SETS[key][1].items():
        lm = model()
        assert lm.name == name and get_load_model(lm) is lm
        assert build("scale-up", 1, load_model=lm).model.load_model is lm


@pytest.mark.parametrize("key", SETS)
def test_the_benchmark_runs_the_set_apart(
    key: str, bench: ModuleType, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    module, models = SETS[key]
    assert bench.HELD_OUT_SETS[key] == models
    assert bench.held_out_module(key) == module
    if key in bench.OWN_MODULE_SETS:  # resolved by the benchmark from the set's module, in no registry
        mod = importlib.import_module(f"pulsar_rebalance.simulator.{module.removesuffix('.py')}")
        own = getattr(mod, f"HELD_OUT_LOAD_MODELS_{key}")
        assert tuple(own) == models
        assert all(bench.OWN_MODULE_MODELS[name] is own[name] for name in models)
    stem = "balance-held-out" if key == "1" else f"balance-held-out-{key}"
    json_path, targets = bench.HELD_OUT_OUTPUTS[key]
    assert json_path.name == f"{stem}.json"
    assert json_path.exists()  # every set has had its full run (bench_balance.py --held-out K)
    assert {k: [p.name for p in v] for k, v in targets.items()} == {f"{stem}-report": [f"{stem}.md"]}
    assert bench.HELD_OUT_SET_OF_BLOCK[f"{stem}-report"] == key
    # a set is not mixed with models by name
    with pytest.raises(SystemExit):
        bench.main(["--held-out", key, "--models", models[-1]])
    # run apart: its models and no other set's
    other = next(m for k, (_, ms) in SETS.items() if k != key for m in ms)
    assert bench.main([*ARGS, "--held-out", key]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in models) and other not in out
    # and by name, like any held-out model
    assert bench.main([*ARGS, "--models", models[-1]]) == 0
    assert models[-1] in capsys.readouterr().out
    # the report says what the set's usages are, in words of its own naming its models
    usages = bench.HELD_OUT_USAGES[key]
    assert any(f"*{name}*" in line for name in models for line in usages)
    assert all(usages != bench.HELD_OUT_USAGES[k] for k in bench.HELD_OUT_SETS if k != key)
    # a set's first full run creates its report file, with the (empty) marked block
    path = tmp_path / "report.md"
    bench._ensure_report(path, f"{stem}-report", f"docs/benchmarks/{stem}.json")
    text = path.read_text(encoding="utf-8")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import figures

    assert [b.name for b in figures.find_blocks(text)] == [f"{stem}-report"]
    assert f"(set {key})" in text and f"{module}`: " + ", ".join(f"*{m}*" for m in models) in text
