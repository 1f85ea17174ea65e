"""The planner's load model degrades gracefully (core.planner.load_model): a CPU that is not the shape
the fit assumes (convex near saturation, dispatch costlier than publish, a broker with a slower CPU) is
still attributed to the bundles that cause it, never "nothing moves it"; the reports' noise is measured
and widens the planner's band so that a balanced, noisy cluster gets no move."""

from __future__ import annotations

import random
from typing import Any

import pytest

from pulsar_rebalance.core.contract.decide import decide_scenario
from pulsar_rebalance.core.contract.load_json import local_broker_data_from_json
from pulsar_rebalance.core.planner.load_model import ClusterView, fit_detail, fit_resource, robust_sigma
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig

CFG = LoadBalancerConfig()


def _broker(cpu_of, bundles: dict[str, tuple[float, float]], cores: float = 8.0) -> dict[str, Any]:
    """A LocalBrokerData report: bundles {name: (msg/s in, fan-out)}, 1 KiB messages; CPU from ``cpu_of``."""
    last = {}
    rin = rout = 0.0
    for name, (rate, fan) in bundles.items():
        last[name] = {
            "msgRateIn": rate,
            "msgRateOut": rate * fan,
            "msgThroughputIn": rate * 1024,
            "msgThroughputOut": rate * fan * 1024,
            "consumerCount": 1,
            "producerCount": 1,
            "topics": 4,
            "cacheSize": 0,
        }
        rin, rout = rin + rate, rout + rate * fan
    nic = 1_000_000.0 * 100  # Kbit/s: NIC far from binding, CPU decides
    return {
        "cpu": {"usage": cpu_of(rin, rout, cores), "limit": cores * 100},
        "bandwidthIn": {"usage": rin * 8, "limit": nic},
        "bandwidthOut": {"usage": rout * 8, "limit": nic},
        "msgRateIn": rin,
        "msgRateOut": rout,
        "msgThroughputIn": rin * 1024,
        "msgThroughputOut": rout * 1024,
        "lastStats": last,
        "bundles": list(last),
        "lastUpdate": 1_700_000_000_000,
    }


def _linear(rin: float, rout: float, cores: float) -> float:
    return 10 + 0.01 * (rin + rout)


def _convex(rin: float, rout: float, cores: float) -> float:
    lin = _linear(rin, rout, cores)
    x = lin / (cores * 100)
    return lin * (1 + 3 * x * x)  # queueing: the cost per message grows near saturation


def _cluster(cpu_of, hot_factor: float = 2.5, n: int = 8, seed: int = 0) -> dict[str, dict[str, Any]]:
    rng = random.Random(seed)
    out = {}
    for i in range(n):
        k = hot_factor if i == 0 else 1.0
        bundles = {f"t/ns/0x{i:02x}{j:06x}_0x{i:02x}{j + 1:06x}": (k * rng.uniform(2000, 4000), 1.0) for j in range(8)}
        out[f"broker-{i}"] = _broker(cpu_of, bundles)
    return out


def _view(reports: dict[str, dict[str, Any]]) -> ClusterView:
    parsed = {b: local_broker_data_from_json(r, b) for b, r in reports.items()}
    return ClusterView(parsed, {}, CFG)


def test_a_convex_cpu_is_still_attributed_to_the_bundles_of_the_hot_broker():
    reports = _cluster(_convex)
    view = _view(reports)
    cpu = view.coef[0]
    assert any(c > 0 for c in cpu), "never all-zero coefficients"
    hot = "broker-0"
    reported = reports[hot]["cpu"]["usage"]
    attributed = sum(view.bundles[b].vec[0] for b in view.owned[hot])
    # the hot broker's own report sets the magnitude: its bundles carry what its CPU shows above the base
    assert attributed > 0.8 * (reported - 10 * 2)
    assert view.usage(hot) == pytest.approx(reported / 800, rel=0.02)
    # moving one of its bundles is predicted to lower it (the old model called this CPU "not movable")
    b = view.owned[hot][0]
    assert view.usage_after(hot, view.bundles[b].vec, -1.0) < view.usage(hot) - 0.01


def test_a_broker_with_a_costlier_cpu_is_read_from_its_own_report():
    def slow_on_3(rin: float, rout: float, cores: float) -> float:
        return _linear(rin, rout, cores)

    reports = _cluster(slow_on_3, hot_factor=1.0)
    r3 = reports["broker-3"]
    r3["cpu"]["usage"] = 10 + 0.02 * (r3["msgRateIn"] + r3["msgRateOut"])  # twice the cost per message
    view = _view(reports)
    # per unit of load, broker-3's CPU costs twice the others' (whatever the fit's units)
    assert view.scale["broker-3"][0] / view.scale["broker-1"][0] == pytest.approx(2.0, rel=0.15)
    assert view.usage("broker-3") == pytest.approx(r3["cpu"]["usage"] / 800, rel=0.02)


def test_fit_through_the_origin_keeps_the_positive_coefficients():
    # a negative intercept with one feature that would turn negative: the old fit returned all zeros here
    xs = [[1000.0 * k, 50.0 * k * k] for k in range(1, 9)]
    ys = [0.012 * x[0] ** 1.3 for x in xs]
    a, coefs = fit_resource(ys, xs)
    assert a >= 0 and any(c > 0 for c in coefs) and all(c >= 0 for c in coefs)
    assert fit_detail(ys, xs).r2 > 0.9


def test_robust_sigma_ignores_an_outlier():
    vals = [0.0, 0.01, -0.01, 0.005, -0.005, 0.0, 0.01, -0.01, 5.0]
    assert robust_sigma(vals) < 0.02
    assert robust_sigma([]) == 0.0


def _noisy(seed: int, noise: float):
    rng = random.Random(seed)

    def cpu_of(rin: float, rout: float, cores: float) -> float:
        return _linear(rin, rout, cores) * (1 + rng.gauss(0, noise))

    return cpu_of


@pytest.mark.parametrize("noise", [0.02, 0.05])
def test_a_balanced_cluster_with_noisy_reports_gets_no_move(noise: float, narrow_band: None):
    # identical traffic on every broker; only the CPU reading differs (up to 5 % noise)
    for seed in range(5):
        rng = random.Random(seed)
        reports = {}
        cpu_of = _noisy(seed, noise)
        for i in range(10):
            bundles = {
                f"t/ns/0x{i:02x}{j:06x}_0x{i:02x}{j + 1:06x}": (3000 + rng.uniform(-30, 30), 1.0) for j in range(8)
            }
            reports[f"broker-{i}"] = _broker(cpu_of, bundles)
        view = _view(reports)
        assert view.noise > 0
        out = decide_scenario(
            {"shedding": "GlobalPlanner", "cycles": [{"brokers": reports, "nowMs": 1_700_000_000_000}]}
        )
        cyc = out["cycles"][0]
        assert cyc["unloads"] == [] and cyc["splits"] == [], (seed, cyc["stats"])
        assert cyc["stats"]["noise"] > 0


def test_a_report_is_one_sample_the_unexplained_part_is_believed_by_half():
    # a linear, noise-free cluster (the fit is exact); broker-0's new report reads 8 CPU points above what
    # its traffic explains: the smoothed usage moves half way, a change in traffic is taken at once
    reports = _cluster(_linear, hot_factor=1.0)
    first = _view(reports)
    previous = {b: (list(u), list(f)) for b, (u, f) in first.smoothed.items()}
    true_cpu = reports["broker-0"]["cpu"]["usage"]
    reports["broker-0"]["cpu"]["usage"] = true_cpu + 8.0
    parsed = {b: local_broker_data_from_json(r, b) for b, r in reports.items()}
    view = ClusterView(parsed, {}, CFG, previous=previous)
    assert view.smoothed["broker-0"][0][0] == pytest.approx(true_cpu + 4.0, abs=0.05)
    assert view.smoothed["broker-1"][0][0] == pytest.approx(reports["broker-1"]["cpu"]["usage"], abs=0.05)
    # more traffic on broker-1 (10 %): its usage follows the fitted cost of it without lag
    prev_cpu = reports["broker-1"]["cpu"]["usage"]
    for s in reports["broker-1"]["lastStats"].values():
        for k in ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut"):
            s[k] *= 1.1
    rin = sum(s["msgRateIn"] for s in reports["broker-1"]["lastStats"].values())
    reports["broker-1"]["cpu"]["usage"] = _linear(rin, rin, 8.0)
    parsed = {b: local_broker_data_from_json(r, b) for b, r in reports.items()}
    view = ClusterView(parsed, {}, CFG, previous=previous)
    assert view.smoothed["broker-1"][0][0] == pytest.approx(reports["broker-1"]["cpu"]["usage"], rel=0.01)
    assert view.smoothed["broker-1"][0][0] > prev_cpu * 1.05


@pytest.mark.parametrize("noise", [0.03, 0.05])
def test_a_balanced_convex_cluster_with_noisy_reports_gets_no_move_over_sixty_cycles(noise: float, narrow_band: None):
    # one sample per cycle, a fresh noise draw each time; the planner remembers its smoothed view across
    # cycles (decide's state): over an hour of one-minute decisions nothing moves on a balanced cluster
    rng = random.Random(7)
    loads = {i: {j: 3000 + rng.uniform(-30, 30) for j in range(8)} for i in range(10)}
    draw = random.Random(13)

    def cpu_of(rin: float, rout: float, cores: float) -> float:
        return _convex(rin, rout, cores) * 6 * (1 + draw.gauss(0, noise))

    cycles = []
    for t in range(60):
        reports = {}
        for i in range(10):
            bundles = {f"t/ns/0x{i:02x}{j:06x}_0x{i:02x}{j + 1:06x}": (v, 1.0) for j, v in loads[i].items()}
            reports[f"broker-{i}"] = _broker(cpu_of, bundles)
        cycles.append({"brokers": reports, "nowMs": 1_700_000_000_000 + t * 60_000})
    out = decide_scenario({"shedding": "GlobalPlanner", "cycles": cycles})
    moved = [(k, u["bundle"]) for k, c in enumerate(out["cycles"]) for u in c["unloads"]]
    assert moved == [] and all(c["splits"] == [] for c in out["cycles"])
    assert max(c["stats"].get("maxUsageBefore", 0) for c in out["cycles"]) > 0.5  # CPU binds, near 60 %


def test_a_broker_clipped_to_its_reports_is_relieved_only_in_proportion():
    # the model put broker-0 at twice what its reports show: its bundles are over-stated there as well, so
    # one leaving it relieves it by the same proportion (not by its full modelled share: a source must not
    # look emptier than its reports can show), while arriving elsewhere it counts in full
    view = _view(_cluster(_linear, hot_factor=1.0))
    b0, b1 = "broker-0", "broker-1"
    bundle = view.owned[b0][0]
    vec = view.bundles[bundle].vec
    modelled = view.usage(b0)
    full_relief = modelled - view.usage_after(b0, vec, -1.0)
    assert full_relief > 0 and not view.clipped(b0)
    view.clip(b0, modelled / 2)
    assert view.clipped(b0) and view.usage(b0) == pytest.approx(modelled / 2)
    assert view.usage(b0) - view.usage_after(b0, vec, -1.0) == pytest.approx(full_relief / 2)
    added = view.usage_after(b1, vec, 1.0) - view.usage(b1)
    view.move(bundle, b1)
    assert view.usage(b0) == pytest.approx(modelled / 2 - full_relief / 2)
    assert view.usage(b1) - (view.usage_after(b1, vec, -1.0)) == pytest.approx(added)


def test_a_brokers_persistent_bias_is_model_error_not_noise():
    """Slower CPUs (1x to 1.6x the cost per message, the same reported limit) scatter the reports far around one
    fitted model, cycle after cycle; from one sample to the next each broker's report moves only by its noise
    (1 %). The band and the minimum gain follow the noise: counted as noise, the bias had raised the trigger
    and the minimum gain above any one bundle, and a hot broker stayed hot (random load models, hidden speeds)."""
    speeds = [1.0, 1.6, 1.1, 1.5, 1.2, 1.4, 1.3, 1.0]
    rng = random.Random(3)

    def reports() -> dict[str, dict[str, Any]]:
        out = _cluster(_linear, hot_factor=1.0, seed=0)
        for i, r in enumerate(out.values()):
            base = 10 + speeds[i] * 0.01 * (r["msgRateIn"] + r["msgRateOut"])
            r["cpu"]["usage"] = base * (1 + rng.gauss(0, 0.01))
        return out

    first = ClusterView({b: local_broker_data_from_json(r, b) for b, r in reports().items()}, {}, CFG)
    assert first.noise == first.fit_noise > 0.05  # no history yet: the spread around the fit, an upper bound
    view = first
    for _ in range(3):
        parsed = {b: local_broker_data_from_json(r, b) for b, r in reports().items()}
        view = ClusterView(parsed, {}, CFG, previous=view.smoothed)
    assert view.fit_noise > 0.05  # the model's error: each broker's bias
    assert view.noise < 0.01  # the reports' noise: what a move must beat
    assert view.noise == view.temporal_noise
