"""Held-out scenarios: problems Pulsar operators hit that nobody tuned the planner on.

The ten scenarios of :data:`pulsar_rebalance.simulator.scenarios.SCENARIOS` are the ones the GlobalPlanner was
tuned on; the held-out *load models* (``held_out_models*.py``) test it on new ways traffic turns into load, but
always on those ten problems. This module holds a set of *problems* kept apart from them
(:data:`HELD_OUT_SCENARIOS`, run by ``benchmarks/bench_held_out_scenarios.py``, its own report), each with what a good
balancer should do there, declared before any strategy ran on it (:data:`EXPECTATIONS`).

Written without reading the planner (neither its code under ``core/planner/``, nor its design notes and history, nor
its tests), from how Pulsar clusters behave and what operators report: Pulsar's docs and the StreamNative and
ThresholdShedder write-ups, the reference on Pulsar's load manager (lookup's ``LeastLongTermMessageRate`` placement,
which ignores throughput and broker size; ``defaultNumberOfNamespaceBundles = 4``), and users' complaints (unloads
"on every short traffic burst", PR #16059; over-unloading after brokers go away, PIP-364's experiments; idle or
overloaded brokers after membership changes, #12160, #21174; "some nodes highly loaded while others are idle",
#19806). The scenarios reuse :mod:`~pulsar_rebalance.simulator.scenarios`' helpers (topics, calibration,
placement, the load model, CPU and rate noise) and change none of the simulator's modules, so that every stored
benchmark report's source digests stay valid: the traffic's time profiles come from :class:`ShapedClusterModel`, a
:class:`~pulsar_rebalance.simulator.dynamics.ClusterModel` with one more factor on every topic's rates.

Time is simulated minutes since the start (one minute per cycle). The closed loop (``simulator/closed_loop.py``)
runs ``run.cycles`` one-minute decisions at the ``minute`` cadence and ``run.dag_decisions`` hourly ones (48: two
days) at the ``dag`` cadence, so a scenario sees its first one to three hours at the first and two days at the
second. Where a profile must fit the run (the swing's period, the growth's span) it takes the cadence
(:func:`build`'s ``cadence``); everything else is the same at both.

========================= ===========================================================================================
broker-crash              10 balanced brokers at 60 %; broker-3 crashes at minute 10 and stays down: lookup re-places
                          its bundles on the 9 survivors (about 67 % each if evenly spread)
diurnal-swing             every topic's traffic rises and falls together, +-35 % around 50 %: a 24 h period at the dag
                          cadence, 60 min at the minute cadence (90 minutes: one and a half swings); nothing to fix
flash-crowd               one namespace's traffic (1 of 8, drawn from the seed) triples from minute 30 to minute 90 of
                          every day, then returns: the minute cadence sees one crowd in 2 hours, the dag two in 2 days
steady-growth             every topic's traffic grows linearly by 50 % over the run (2 hours at the minute cadence, 2 days
                          at the dag); broker-0 starts 1.25x as loaded as the others (at 50 % average)
small-brokers-few-bundles 30 small brokers (2 cores, 250 Mbit/s) under 48 namespaces of Pulsar's default 4 bundles, dealt
                          out by count: about 6 bundles a broker, each a large share of it
========================= ===========================================================================================

Each scenario's criteria (:data:`EXPECTATIONS`) are drawn from the balance benchmark's (``bench_balance.py``'s
``done_when``): *not_worse* (final max at most doing nothing's + 0.005), *no_hot* (no broker above 85 % where doing
nothing stays below) and *moves* (at most 1.5x the moves of the closest Pulsar strategy where the planner ends lower)
everywhere; *steady* (0 moves) where nothing a move can fix happens, *jitter* (at most 2 moves per simulated day)
where the load comes and goes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pulsar_rebalance.simulator.dynamics import ClusterModel, Event
from pulsar_rebalance.simulator.load_models import LoadModel, get_load_model
from pulsar_rebalance.simulator.scenarios import (
    _OPTIONS,
    DAG_DECISIONS,
    SCENARIOS,
    ScenarioRun,
    _bundle_loads,
    _calibrate,
    _new_model,
    _options,
    _place_balanced,
    _place_by_count,
)

CADENCES = ("minute", "dag")
"""The closed loop's cadences (``simulator/closed_loop.py``): a decision per simulated minute, or per hour."""
DAG_MINUTES = DAG_DECISIONS * 60
"""Simulated minutes a run at the dag cadence covers (48 hourly decisions: 2 days)."""
DAY_MINUTES = 24 * 60

Shape = Callable[[str, float], float]
"""A traffic profile: (namespace, simulated minutes since the start) -> the factor on its topics' rates."""


class ShapedClusterModel(ClusterModel):
    """A :class:`ClusterModel` whose topics' rates (in and out, so throughputs too) are multiplied by a time profile
    (:data:`Shape`, per namespace) on top of the base model's daily cycle, drift and bursts.

    Made by :func:`shaped` from a model the scenario helpers built (the same instance, re-typed: only
    ``_update_rates`` differs, so nothing the helpers set up is built twice)."""

    shape: Shape

    def _update_rates(self) -> None:
        super()._update_rates()
        shape = getattr(self, "shape", None)
        if shape is None:  # while ClusterModel.__init__ runs, before the profile is set
            return
        minutes = self.cycle * self.interval_ms / 60_000
        factors = {ns: shape(ns, minutes) for ns in self.namespaces}
        for t in self.topics:
            f = factors.get(t.namespace, 1.0)
            t.rate_in *= f
            t.rate_out *= f


def shaped(model: ClusterModel, shape: Shape) -> ShapedClusterModel:
    """``model`` with the traffic profile ``shape`` from now on (rates recomputed at once)."""
    model.__class__ = ShapedClusterModel
    assert isinstance(model, ShapedClusterModel)
    model.shape = shape
    model._update_rates()
    return model


def _cadence() -> str:
    return str(_OPTIONS.current.get("cadence") or "minute")


def _ids(model: ClusterModel) -> list[str]:
    return list(model.brokers)


def _calibrate_to(model: ClusterModel, target: float) -> None:
    """:func:`~pulsar_rebalance.simulator.scenarios._calibrate` repeated until the ideal usage is ``target`` (within
    1e-6 of it): its rounds stop short where a load model's fixed part (the idle broker's CPU) dominates the first
    guess - 30 small brokers under ``linear``, any scenario under ``in-out-fanout`` - and these scenarios are meant
    at their stated load under every model."""
    for _ in range(12):
        _calibrate(model, target)
        if abs(model.ideal_usage() - target) <= 1e-6 * target:
            return


def _place_weighted(model: ClusterModel, brokers: list[str], weight: Mapping[str, float]) -> None:
    """Longest-processing-time greedy as :func:`~pulsar_rebalance.simulator.scenarios._place_balanced`, with each
    broker's share scaled by ``weight`` (default 1): a broker of weight 1.25 ends with about 1.25x the others' load."""
    loads = _bundle_loads(model)
    used = {b: 0.0 for b in brokers}
    cap = {b: model.brokers[b].cores / 8.0 * weight.get(b, 1.0) for b in brokers}
    for bundle in sorted(loads, key=lambda x: (-loads[x], x)):
        dest = min(brokers, key=lambda b: (used[b] + loads[bundle]) / cap[b])
        used[dest] += loads[bundle]
        model.owners[bundle] = dest


# ---------------------------------------------------------------- the scenarios

CRASH_MINUTE = 10
CRASHED = "broker-3:8080"
CRASH_LOAD = 0.6


def broker_crash(seed: int) -> ScenarioRun:
    """A broker crashes under load (not a clean restart: it stays down), and Pulsar's lookup re-places its bundles
    on the survivors by their message rate, blind to throughput: what the survivors are left with is the problem."""
    ev = [Event(CRASH_MINUTE, "fail", broker=CRASHED)]
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=8, bundles_per_ns=16, n_topics=4000, events=ev)
    _calibrate_to(m, CRASH_LOAD)
    _place_balanced(m, _ids(m))
    return ScenarioRun(
        "broker-crash",
        seed,
        m,
        60,
        f"10 balanced brokers at {CRASH_LOAD:.0%}; {CRASHED.split(':')[0]} crashes at minute {CRASH_MINUTE} and stays "
        "down, lookup re-places its bundles on the 9 survivors",
    )


SWING = 0.35
"""The diurnal swing's amplitude: every topic's traffic between 0.65x and 1.35x its mean."""
SWING_PERIOD_MIN = {"minute": 60, "dag": DAY_MINUTES}
"""The swing's period per cadence: a day at the DAG's (2 days of hourly decisions), an hour at the minute cadence."""
SWING_CYCLES = 90
SWING_LOAD = 0.5


def diurnal_swing(seed: int) -> ScenarioRun:
    """Every broker's traffic rises and falls together (a day's business hours; at the minute cadence a shorter
    period). A balanced cluster stays balanced at every point of the swing: nothing a move can fix."""
    period = SWING_PERIOD_MIN[_cadence()]
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=8, bundles_per_ns=16, n_topics=4000, noise=0.03, daily=0.0)
    _calibrate_to(m, SWING_LOAD)  # at minute 0 the profile is 1: the mean
    _place_balanced(m, _ids(m))
    shaped(m, lambda _ns, minutes: 1.0 + SWING * math.sin(2 * math.pi * minutes / period))
    return ScenarioRun(
        "diurnal-swing",
        seed,
        m,
        SWING_CYCLES,
        f"balanced; every topic's traffic swings together +-{SWING:.0%} around {SWING_LOAD:.0%}, period {period // 60} h",
    )


CROWD_FACTOR = 3.0
CROWD_START_MIN = 30
CROWD_END_MIN = 90
CROWD_CYCLES = 120
CROWD_LOAD = 0.45


def flash_crowd(seed: int) -> ScenarioRun:
    """One namespace's traffic triples for an hour (a broadcast, a sale, a replay), every day at the same time, then
    returns: a good balancer does not chase it (the moves would be wrong an hour later) unless a broker runs hot."""
    m, rng = _new_model(seed, n_brokers=10, n_namespaces=8, bundles_per_ns=16, n_topics=4000)
    _calibrate_to(m, CROWD_LOAD)
    _place_balanced(m, _ids(m))
    hot = rng.choice(sorted(m.namespaces))

    def crowd(ns: str, minutes: float) -> float:
        at = minutes % DAY_MINUTES
        return CROWD_FACTOR if ns == hot and CROWD_START_MIN <= at < CROWD_END_MIN else 1.0

    shaped(m, crowd)
    return ScenarioRun(
        "flash-crowd",
        seed,
        m,
        CROWD_CYCLES,
        f"{hot}'s traffic x{CROWD_FACTOR:g} from minute {CROWD_START_MIN} to {CROWD_END_MIN} of every day, then back",
    )


GROWTH = 0.5
"""All traffic grows by this fraction over the run, linearly in time."""
GROWTH_CYCLES = 120
GROWTH_SPAN_MIN = {"minute": GROWTH_CYCLES, "dag": DAG_MINUTES}
"""The growth's span per cadence: the run (2 hours of minute decisions, 2 days of hourly ones)."""
GROWTH_LOAD = 0.5
GROWTH_HOT = 1.25
"""broker-0's load at the start, as a multiple of each other broker's."""


def steady_growth(seed: int) -> ScenarioRun:
    """Traffic grows by half over the run with one broker a little hotter than the rest: nothing is wrong at the
    start; by the end that broker is the first to run out of room unless load moves off it in time."""
    span = GROWTH_SPAN_MIN[_cadence()]
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=8, bundles_per_ns=16, n_topics=4000)
    _calibrate_to(m, GROWTH_LOAD)
    ids = _ids(m)
    _place_weighted(m, ids, {ids[0]: GROWTH_HOT})
    shaped(m, lambda _ns, minutes: 1.0 + GROWTH * min(minutes / span, 1.0))
    return ScenarioRun(
        "steady-growth",
        seed,
        m,
        GROWTH_CYCLES,
        f"all traffic +{GROWTH:.0%} over {span // 60} h from {GROWTH_LOAD:.0%}; broker-0 starts at {GROWTH_HOT:g}x the others",
    )


SMALL_BROKERS = 30
SMALL_CORES = 2.0
SMALL_NIC_MBPS = 250.0
SMALL_NAMESPACES = 48
SMALL_BUNDLES = 4
SMALL_LOAD = 0.5


def small_brokers_few_bundles(seed: int) -> ScenarioRun:
    """A wide cluster of small brokers serving many namespaces of Pulsar's default 4 bundles each, assigned by count
    as they were created: few bundles a broker, each a large part of it - the granularity is coarse."""
    m, rng = _new_model(
        seed,
        n_brokers=SMALL_BROKERS,
        n_namespaces=SMALL_NAMESPACES,
        bundles_per_ns=SMALL_BUNDLES,
        n_topics=4000,
        big=dict.fromkeys(range(SMALL_BROKERS), (SMALL_CORES, SMALL_NIC_MBPS)),
    )
    _calibrate_to(m, SMALL_LOAD)
    _place_by_count(m, _ids(m), rng)
    return ScenarioRun(
        "small-brokers-few-bundles",
        seed,
        m,
        60,
        f"{SMALL_BROKERS} brokers of {SMALL_CORES:g} cores / {SMALL_NIC_MBPS:g} Mbit/s, {SMALL_NAMESPACES} namespaces x "
        f"{SMALL_BUNDLES} bundles spread by count, at {SMALL_LOAD:.0%}",
    )


HELD_OUT_SCENARIOS: Mapping[str, Callable[[int], ScenarioRun]] = {
    "broker-crash": broker_crash,
    "diurnal-swing": diurnal_swing,
    "flash-crowd": flash_crowd,
    "steady-growth": steady_growth,
    "small-brokers-few-bundles": small_brokers_few_bundles,
}


@dataclass(frozen=True, slots=True)
class Expectation:
    """What a scenario is and what a good balancer does there, as the balance benchmark's criteria."""

    description: str
    criteria: tuple[str, ...]
    """Keys of ``bench_balance.CRITERIA`` that apply: the others are not judged on this scenario."""
    why: str


ALWAYS = ("not_worse", "no_hot", "moves")

EXPECTATIONS: Mapping[str, Expectation] = {
    "broker-crash": Expectation(
        "a broker crashes under load (60 %) and stays down; lookup re-places its bundles on the survivors",
        ALWAYS,
        "the crashed broker's load must go somewhere: even out what lookup (by message rate, blind to bytes) left "
        "uneven, without pushing a survivor over 85 % and without more moves than Pulsar needs",
    ),
    "diurnal-swing": Expectation(
        "every broker's traffic rises and falls together, +-35 % (a day at the dag cadence, an hour at the minute one)",
        ("not_worse", "no_hot", "steady", "moves"),
        "a balanced cluster stays balanced through a common-mode swing: the hottest broker rises with the rest, no "
        "move makes it lower, so the right number of moves is 0",
    ),
    "flash-crowd": Expectation(
        "one namespace's traffic triples for an hour a day, then returns",
        ("not_worse", "no_hot", "jitter", "moves"),
        "the crowd comes and goes within the hour and leaves every broker below 85 %: moves made for it are wrong "
        "once it ends, so at most 2 moves a simulated day, ending no higher than doing nothing",
    ),
    "steady-growth": Expectation(
        "all traffic grows by 50 % over the run; one broker starts 1.25x as loaded as the rest",
        ALWAYS,
        "growth makes the slightly hotter broker the first to run short: move enough load off it, in time, to keep it "
        "from the 85 % line doing nothing reaches, with moves in proportion",
    ),
    "small-brokers-few-bundles": Expectation(
        "30 small brokers (2 cores), 48 namespaces of 4 bundles spread by count: coarse granularity",
        ALWAYS,
        "with about 6 bundles a broker each move is a big step: bring the hottest broker down where a move or split "
        "can, without overshooting onto another broker and with moves in proportion",
    ),
}
"""Each held-out scenario's description and declared criteria, written with the scenarios, before any run."""


def build_from(
    registry: Mapping[str, Callable[[int], ScenarioRun]],
    name: str,
    seed: int = 0,
    *,
    load_model: str | LoadModel | None = None,
    noise: float | None = None,
    rate_noise: float = 0.0,
    cadence: str = "minute",
) -> ScenarioRun:
    """``registry[name](seed)`` under the options :func:`build` takes, each checked first: a held-out set's builder
    (``functools.partial(build_from, ITS_REGISTRY)``)."""
    if name not in registry:
        raise KeyError(f"unknown held-out scenario {name!r}; known: {', '.join(registry)}")
    if cadence not in CADENCES:
        raise ValueError(f"unknown cadence {cadence!r}; known: {', '.join(CADENCES)}")
    get_load_model(load_model)  # an unknown name fails here, before anything is built
    with _options(load_model=load_model, noise=noise, rate_noise=rate_noise, cadence=cadence):
        return registry[name](seed)


build = functools.partial(build_from, HELD_OUT_SCENARIOS)
"""``build(name, seed=0, *, load_model=None, noise=None, rate_noise=0.0, cadence="minute")``: the named held-out
scenario for ``seed``; ``KeyError`` lists the known names.

``load_model``, ``noise``, ``rate_noise``: as :func:`pulsar_rebalance.simulator.scenarios.build`. ``cadence``
(``minute`` or ``dag``): the cadence the run will be driven at, for the profiles that span the run
(``diurnal-swing``'s period, ``steady-growth``'s span); the other scenarios are the same at both."""


assert not set(HELD_OUT_SCENARIOS) & set(SCENARIOS), "a held-out scenario shares a name with a tuned-on one"
assert set(EXPECTATIONS) == set(HELD_OUT_SCENARIOS)

__all__ = [
    "CADENCES",
    "EXPECTATIONS",
    "HELD_OUT_SCENARIOS",
    "Expectation",
    "ShapedClusterModel",
    "build",
    "build_from",
    "shaped",
]
