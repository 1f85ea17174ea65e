"""Held-out scenarios, fifth set: kept in reserve until its first run, on core `80f8646aa0` (the change it measured).

Written as the earlier sets were (:mod:`~pulsar_rebalance.simulator.held_out_scenarios_4`): without reading the
planner (neither its code under ``core/planner/``, nor its design notes and history, nor its tests) nor any benchmark
report, from how Pulsar places and serves load and what operators report, and developed with doing nothing and
Pulsar's own strategies only; each scenario's criteria (:data:`EXPECTATIONS_5`) were declared with it, before any
strategy ran on it, and its magnitudes (the loads, the shares, the factors) set on doing nothing alone. (While
``docs/benchmarks/README.md`` was edited for it, the earlier sets' headline blocks were on screen; no magnitude or
criterion changed after that.)
``benchmarks/bench_held_out_scenarios.py --set 5`` runs it; its first full run is the measure of the planner change
that follows. It reuses the earlier sets' machinery (:func:`~pulsar_rebalance.simulator.held_out_scenarios.shaped`'s
time profile, :func:`~pulsar_rebalance.simulator.held_out_scenarios_2.churning`'s topics that exist only part of the
run, :func:`~pulsar_rebalance.simulator.held_out_scenarios_3._add_namespace_topics` and the calibration to an exact
load, :func:`~pulsar_rebalance.simulator.held_out_scenarios_4._cluster`'s cluster and its scenario topics) and
:mod:`~pulsar_rebalance.simulator.scenarios`' helpers, and changes none of the simulator's modules: the brokers
replaced are the cluster model's own ``leave`` and ``join`` events, the hot key its own scheduled ``burst``.

Time is simulated minutes since the start, as in the earlier sets: ``run.cycles`` one-minute decisions at the
``minute`` cadence, ``run.dag_decisions`` (48: two days) hourly ones at the ``dag`` cadence. No profile here spans the
run: every scenario is the same at both cadences (the dag cadence decides at minutes 0, 60, 120, ...).

================= =====================================================================================================
hourly-batch      an ETL namespace (Pulsar's default 4 bundles, about a ninth of the traffic) is written and read 2.5x as
                  fast for 10 minutes every hour by a cron job (the run starts 5 minutes past an hour: the job runs from
                  minute 55 to 65, 115 to 125, ...): the dag cadence decides 5 minutes into every run of the job, the
                  minute cadence sees it come and go. At 45 %
hardware-refresh  brokers 0 to 3 are replaced, one every 10 minutes from minute 20, by a newer generation of hosts with
                  1.5x the cores and NIC (each leaves - lookup re-places its bundles by message rate, blind to size -
                  and its replacement joins empty 2 minutes later under the same name): the cluster's capacity grows by
                  a fifth, where the load is does not follow. At 50 % before the refresh
ingest-firehose   at minute 20 two ingest-only topics start (an audit log, raw device telemetry: written, archived by
                  tiered storage, no live subscription), each 25 % of a broker's load, all of it bytes in: their
                  brokers' NIC in (or CPU) rises, their NIC out does not; it stays. At 45 %
hot-key           a keyed partitioned topic (16 partitions, a tenth of the traffic, key-hash routing); at minute 20 a
                  large customer's key starts: all its messages go to one partition, which gains 25 % of a broker's
                  load; it stays. At 45 %
running-hot       a cluster sized to run hot: balanced at 70 %, 4 % CPU noise, the usual drift and daily cycle, 15
                  points below the overload line; nothing happens
================= =====================================================================================================

Each scenario's criteria are the balance benchmark's, as in the earlier sets: *not_worse*, *no_hot* and *moves*
everywhere; *steady* where nothing a move can fix happens (running-hot), *jitter* where the load comes and goes
(hourly-batch).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from pulsar_rebalance.simulator.dynamics import Event
from pulsar_rebalance.simulator.held_out_scenarios import (
    CADENCES,
    Expectation,
    _calibrate_to,
    _ids,
    build_from,
    shaped,
)
from pulsar_rebalance.simulator.held_out_scenarios import HELD_OUT_SCENARIOS as SET_1
from pulsar_rebalance.simulator.held_out_scenarios_2 import HELD_OUT_SCENARIOS_2 as SET_2
from pulsar_rebalance.simulator.held_out_scenarios_2 import churning
from pulsar_rebalance.simulator.held_out_scenarios_3 import (
    DEFAULT_BUNDLES,
    NEVER,
    _add_namespace_topics,
    _balanced,
)
from pulsar_rebalance.simulator.held_out_scenarios_3 import HELD_OUT_SCENARIOS_3 as SET_3
from pulsar_rebalance.simulator.held_out_scenarios_4 import HELD_OUT_SCENARIOS_4 as SET_4
from pulsar_rebalance.simulator.held_out_scenarios_4 import NAMESPACES, _cluster, _topic
from pulsar_rebalance.simulator.scenarios import (
    SCENARIOS,
    ScenarioRun,
    _load,
    _new_model,
    _place_balanced,
    _topic_stats,
)

# ---------------------------------------------------------------- an hourly batch job

BATCH_NS = "etl/hourly-export"
"""The batch job's namespace: created with Pulsar's default 4 bundles."""
BATCH_FIRST_MIN = 55
"""The job's first run: the run starts 5 minutes past an hour, the job runs at the top of every hour."""
BATCH_PERIOD_MIN = 60
BATCH_RUN_MIN = 10
BATCH_FACTOR = 2.5
"""The namespace's traffic (in and out) while the job runs, as a multiple of its own the rest of the hour."""
BATCH_CYCLES = 120
BATCH_LOAD = 0.45


def batch_running(minutes: float) -> bool:
    """Whether the hourly job runs at simulated ``minutes``."""
    return minutes >= BATCH_FIRST_MIN and (minutes - BATCH_FIRST_MIN) % BATCH_PERIOD_MIN < BATCH_RUN_MIN


def hourly_batch(seed: int) -> ScenarioRun:
    """A cron job exports (or re-processes) an hour's data at the top of every hour: for 10 minutes its namespace's
    topics are written and read 2.5 times as fast, on the 4 brokers that own its bundles, then it is quiet until
    the next hour. Every hour, for good: a placement made for the job's 10 minutes is wrong for the other 50."""
    m, _ = _new_model(
        seed,
        n_brokers=10,
        n_namespaces=0,
        bundles_per_ns=0,
        n_topics=4000,
        namespace_bundles={**NAMESPACES, BATCH_NS: DEFAULT_BUNDLES},
    )
    run = _balanced(  # balanced between the job's runs, at minute 0
        "hourly-batch",
        seed,
        m,
        BATCH_LOAD,
        BATCH_CYCLES,
        f"{BATCH_NS} ({DEFAULT_BUNDLES} bundles) x{BATCH_FACTOR:g} for {BATCH_RUN_MIN} min every hour from minute "
        f"{BATCH_FIRST_MIN}",
    )
    shaped(m, lambda ns, minutes: BATCH_FACTOR if ns == BATCH_NS and batch_running(minutes) else 1.0)
    return run


# ---------------------------------------------------------------- brokers replaced by a newer generation

REFRESHED = tuple(f"broker-{i}:8080" for i in range(4))
REFRESH_START_MIN = 20
REFRESH_EVERY_MIN = 10
REFRESH_DOWN_MIN = 2
"""Minutes from a broker's leaving to its replacement joining (under the same name, empty)."""
REFRESH_SIZE = 1.5
"""The new generation's cores and NIC, as a multiple of the old's."""
REFRESH_CYCLES = 90
REFRESH_LOAD = 0.5


def refresh_events() -> list[Event]:
    """Each of :data:`REFRESHED` leaves in turn and its replacement (``REFRESH_SIZE`` x the standard broker) joins."""
    out = []
    for i, broker in enumerate(REFRESHED):
        minute = REFRESH_START_MIN + i * REFRESH_EVERY_MIN
        out.append(Event(minute, "leave", broker=broker))
        out.append(
            Event(
                minute + REFRESH_DOWN_MIN,
                "join",
                broker=broker,
                cores=8.0 * REFRESH_SIZE,
                nic_mbps=1000.0 * REFRESH_SIZE,
            )
        )
    return out


def hardware_refresh(seed: int) -> ScenarioRun:
    """An operator moves the brokers onto a newer generation of hosts, one at a time: each broker is drained by its
    shutdown (lookup re-places its bundles on the others by message rate) and comes back on the new host, empty and
    half again as large. Lookup knows neither sizes nor that more brokers will follow; nothing else changes."""
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=8, bundles_per_ns=16, n_topics=4000, events=refresh_events())
    return _balanced(
        "hardware-refresh",
        seed,
        m,
        REFRESH_LOAD,
        REFRESH_CYCLES,
        f"{', '.join(b.split(':')[0] for b in REFRESHED)} replaced one every {REFRESH_EVERY_MIN} min from minute "
        f"{REFRESH_START_MIN} by hosts {REFRESH_SIZE:g}x as large (each back empty {REFRESH_DOWN_MIN} min later)",
    )


# ---------------------------------------------------------------- ingest-only topics

FIRE_NS = "tenant-3/ns-7"
FIREHOSE = (("audit-log", 2048.0), ("device-telemetry-raw", 512.0))
"""(name, message size) of each ingest-only topic: written, never read live (tiered storage archives them)."""
FIRE_MIN = 20
FIRE_SHARE = 0.25
"""Each ingest-only topic's load, as a fraction of a standard broker's at the stated load (all of it bytes in)."""
FIRE_CYCLES = 90
FIRE_LOAD = 0.45


def ingest_firehose(seed: int) -> ScenarioRun:
    """Two pipelines start writing into an existing namespace (an audit log, raw device telemetry) whose data nobody
    reads live: an offload policy moves it to tiered storage, a batch reads it from there. Their brokers take the bytes
    in; what they send out does not change, nor does any other broker's traffic."""
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=0, bundles_per_ns=0, n_topics=4000, namespace_bundles=NAMESPACES)
    fire = [_topic(f"persistent://{FIRE_NS}/{name}", size, 0.0, 0.0, 4) for name, size in FIREHOSE]
    for t in fire:  # one load each, whatever its message size
        t.rate_in = t.base_rate
        t.base_rate /= _load(m, _topic_stats(t))
    units = len(m.brokers) * FIRE_LOAD  # the others' load at the stated load, in standard brokers
    _add_namespace_topics(m, fire, len(fire) * FIRE_SHARE / units)
    return _balanced(
        "ingest-firehose",
        seed,
        churning(m, {t.name: (float(FIRE_MIN), NEVER) for t in fire}),
        FIRE_LOAD,
        FIRE_CYCLES,
        f"from minute {FIRE_MIN} {len(fire)} ingest-only topics in {FIRE_NS} (no live subscription), each "
        f"{FIRE_SHARE:.0%} of a broker, all bytes in; they stay",
    )


# ---------------------------------------------------------------- a hot key on a keyed partitioned topic

KEY_NS = "payments/transactions"
KEY_TOPIC = f"persistent://{KEY_NS}/ledger"
KEY_PARTITIONS = 16
KEY_SHARE = 0.1
"""The partitioned topic's traffic as a fraction of the rest of the cluster's, spread evenly over its partitions."""
KEY_HOT = 7
"""The partition the customer's key hashes to."""
KEY_MIN = 20
KEY_EXTRA = 0.25
"""The load the customer's key adds to its partition, as a fraction of a standard broker's."""
KEY_CYCLES = 90
KEY_LOAD = 0.45


def key_partition(i: int) -> str:
    """Partition ``i`` of the keyed topic (``<topic>-partition-<i>``)."""
    return f"{KEY_TOPIC}-partition-{i}"


def hot_key(seed: int) -> ScenarioRun:
    """A payments topic routes by key (the account id), so that each account's messages stay in order; a large
    merchant is onboarded and all of its traffic goes to the one partition its key hashes to. The topic's other
    partitions, and every other topic, do not change: one partition - one topic, which no split divides - carries a
    quarter of a broker more, for good."""
    surge = Event(KEY_MIN, "burst", topic=key_partition(KEY_HOT), factor=1.0)
    m, phase = _cluster(seed, KEY_NS, 16, [surge])
    parts = [_topic(key_partition(i), 1024.0, 1.0, phase, 8) for i in range(KEY_PARTITIONS)]
    _add_namespace_topics(m, parts, KEY_SHARE)
    run = _balanced(  # churning with no lifetimes: the partitions indexed into their bundles, all live throughout
        "hot-key",
        seed,
        churning(m, {}),
        KEY_LOAD,
        KEY_CYCLES,
        f"{KEY_TOPIC} ({KEY_PARTITIONS} partitions, {KEY_SHARE:.0%} more than the rest's traffic, by key); from minute "
        f"{KEY_MIN} one key adds {KEY_EXTRA:.0%} of a broker to partition {KEY_HOT}; it stays",
    )
    hot = m._by_name[key_partition(KEY_HOT)]
    surge.factor = 1.0 + KEY_EXTRA / _load(m, _topic_stats(hot))  # calibrated: its load at minute 0, plus the key's
    return run


# ---------------------------------------------------------------- a cluster run hot

HOT_NOISE = 0.04
"""CPU noise: a busy broker's (GC, compaction, the OS) reported CPU jumps more than an idle one's."""
HOT_CYCLES = 60
HOT_LOAD = 0.7


def running_hot(seed: int) -> ScenarioRun:
    """Capacity planned to 70 %: the cluster is balanced and stays so, its traffic drifting and following its daily
    cycle, its CPU noisy; every broker 15 points below the overload line, near where shedders' thresholds sit.
    Nothing changes that a move can fix."""
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=8, bundles_per_ns=16, n_topics=4000, noise=HOT_NOISE)
    _calibrate_to(m, HOT_LOAD)
    _place_balanced(m, _ids(m))
    return ScenarioRun(
        "running-hot",
        seed,
        m,
        HOT_CYCLES,
        f"balanced at {HOT_LOAD:.0%}, {HOT_NOISE:.0%} CPU noise, drift and daily cycle; nothing happens",
    )


HELD_OUT_SCENARIOS_5: Mapping[str, Callable[[int], ScenarioRun]] = {
    "hourly-batch": hourly_batch,
    "hardware-refresh": hardware_refresh,
    "ingest-firehose": ingest_firehose,
    "hot-key": hot_key,
    "running-hot": running_hot,
}

ALWAYS = ("not_worse", "no_hot", "moves")

EXPECTATIONS_5: Mapping[str, Expectation] = {
    "hourly-batch": Expectation(
        "a cron job multiplies an ETL namespace's traffic (default 4 bundles, about a ninth of the total) by 2.5 for 10 "
        "minutes every hour, from minute 55: the dag cadence decides 5 minutes into every run of the job",
        ("not_worse", "no_hot", "jitter", "moves"),
        "the job comes and goes every hour and leaves every broker below 85 %: moves that follow it are wrong 10 "
        "minutes later, and a decision taken while it runs sees a peak the rest of the hour does not have; at most 2 "
        "moves a simulated day (placing the job's bundles where the peak fits, once, is the most a balancer does), "
        "ending no higher than doing nothing",
    ),
    "hardware-refresh": Expectation(
        "4 of 10 brokers replaced, one every 10 minutes from minute 20, by hosts 1.5x as large: each leaves (lookup "
        "re-places its bundles by message rate) and its replacement joins empty 2 minutes later",
        ALWAYS,
        "the capacity grows by a fifth and the load stays where lookup put it - the old brokers heavier, the last new "
        "host empty, none of the placement by size: even it out by capacity (the new hosts taking half again as much "
        "as the old), without pushing a broker over 85 % and with moves in proportion",
    ),
    "ingest-firehose": Expectation(
        "from minute 20 two ingest-only topics (no live subscription) each add 25 % of a broker, all bytes in, to the "
        "brokers owning their bundles; they stay",
        ALWAYS,
        "the firehoses' brokers carry their bytes in for good while their bytes out, and every other broker, stay as "
        "they were: bring them back in line by moving their other bundles away (a topic cannot be split, and the "
        "brokers' spare NIC in is elsewhere), without pushing a broker over 85 % and with moves in proportion",
    ),
    "hot-key": Expectation(
        "a keyed 16-partition topic (a tenth of the traffic); from minute 20 one customer's key adds 25 % of a broker "
        "to the partition it hashes to; it stays",
        ALWAYS,
        "one partition's broker carries a quarter of a broker more for good, and no split divides a topic: move what "
        "else that broker holds (or split the hot partition's bundle and move its other topics) to bring it back in "
        "line, without pushing a broker over 85 % and with moves in proportion",
    ),
    "running-hot": Expectation(
        "balanced at 70 % (capacity planned to run hot), 4 % CPU noise, drift and the daily cycle; nothing happens",
        ("not_worse", "no_hot", "steady", "moves"),
        "the placement is as even as any: the brokers' differences are CPU noise, drift and the daily cycle, which no "
        "move removes, and every move disconnects clients on a busy cluster and may land a bundle where the next "
        "minute's noise makes it look worse; nothing a move can fix, so the right number of moves is 0",
    ),
}
"""Each scenario's description and declared criteria, written with the scenarios, before any strategy ran on them."""


build = functools.partial(build_from, HELD_OUT_SCENARIOS_5)
"""``build(name, seed=0, *, load_model=None, noise=None, rate_noise=0.0, cadence="minute")``: the named scenario of the
fifth held-out set for ``seed`` (``KeyError`` lists the known names), as the first set's
:func:`~pulsar_rebalance.simulator.held_out_scenarios.build`; ``cadence`` is checked and passed on as in the earlier
sets, and no scenario of this set depends on it."""


assert not set(HELD_OUT_SCENARIOS_5) & set(SCENARIOS), "a held-out scenario shares a name with a tuned-on one"
assert not set(HELD_OUT_SCENARIOS_5) & set(SET_1), "a scenario of the fifth set shares a name with the first's"
assert not set(HELD_OUT_SCENARIOS_5) & set(SET_2), "a scenario of the fifth set shares a name with the second's"
assert not set(HELD_OUT_SCENARIOS_5) & set(SET_3), "a scenario of the fifth set shares a name with the third's"
assert not set(HELD_OUT_SCENARIOS_5) & set(SET_4), "a scenario of the fifth set shares a name with the fourth's"
assert set(EXPECTATIONS_5) == set(HELD_OUT_SCENARIOS_5)

__all__ = [
    "CADENCES",
    "EXPECTATIONS_5",
    "HELD_OUT_SCENARIOS_5",
    "batch_running",
    "build",
    "key_partition",
    "refresh_events",
]
