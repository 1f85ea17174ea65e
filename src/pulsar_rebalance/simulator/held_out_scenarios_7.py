"""Held-out scenarios, seventh set: kept in reserve until its first run.

Written as the earlier sets were (:mod:`~pulsar_rebalance.simulator.held_out_scenarios_6`): without reading the
planner (neither its code under ``core/``, nor its design notes and history, nor its tests) nor any benchmark report
(neither the reports nor their JSON nor the READMEs' headlines), from how Pulsar places and serves load and what
operators report (the reference on Pulsar's load manager: ``LeastLongTermMessageRate`` placement by message rate,
blind to bytes and to broker size, the auto split at ``loadBalancerNamespaceBundleMaxMsgRate``; the operators'
complaints of ``peers.md``: unloads "on every short traffic burst", PR #16059; a heterogeneous cluster where message
rates, not capacity, are evened out, PIP-364's experiments), and developed with doing nothing and Pulsar's own
strategies only; each scenario's criteria (:data:`EXPECTATIONS_7`) were declared with it, before any strategy ran on
it, and its magnitudes (the loads, the shares, the timings) set on doing nothing alone.
``benchmarks/bench_held_out_scenarios.py --set 7`` runs it (its own report only, no headline); its first full run is
the measure of the planner change that follows. It reuses the earlier sets' machinery
(:func:`~pulsar_rebalance.simulator.held_out_scenarios.shaped`'s time profile,
:func:`~pulsar_rebalance.simulator.held_out_scenarios_2.churning`'s topics indexed into their bundles,
:class:`~pulsar_rebalance.simulator.held_out_scenarios_2.DegradedLoadModel`'s wrapper of a load model,
:func:`~pulsar_rebalance.simulator.held_out_scenarios_3._add_namespace_topics` and the calibration to an exact load,
:func:`~pulsar_rebalance.simulator.held_out_scenarios_4._cluster`'s cluster and its scenario topics) and
:mod:`~pulsar_rebalance.simulator.scenarios`' helpers, and changes none of the simulator's modules: the snapshot's
walk over a database's tables is the cluster model's own scheduled ``burst`` events; what the existing models cannot
say is said by subclasses of them (:class:`CatchUpClusterModel`: replicators sending a backlog, each at its own speed,
until each has caught up; :class:`HostAgentLoadModel`: CPU a host spends outside the broker, on a schedule).

Time is simulated minutes since the start, as in the earlier sets: ``run.cycles`` one-minute decisions at the
``minute`` cadence, ``run.dag_decisions`` (48: two days) hourly ones at the ``dag`` cadence. No profile here spans the
run: every scenario is the same at both cadences (the dag cadence decides at minutes 0, 60, 120, ...; the run starts
at the top of an hour).

========================= =============================================================================================
geo-replication-catchup   a tenant's 2 replicated namespaces (Pulsar's default 4 bundles each; 20 % of the traffic with
                          their replication) could not replicate to the remote region for 4 hours; at minute 20 the
                          link is back and every replicator sends its 4-hour backlog on top of the new messages, each at
                          its own speed (1.5x to 5x its topic's publish rate, drawn per topic), until it has caught up:
                          1 to 8 hours; then it replicates as before the outage. At 45 % (the link down)
telemetry-flood           a two-generation cluster (brokers 0-3 with 16 cores and 2 Gbit/s, 4-9 with 8 cores and 1
                          Gbit/s, balanced by capacity); at minute 20 a bad configuration push makes a device fleet
                          report 12 times as often: its namespace (default 4 bundles, 1.5 % of the load, 160-byte
                          messages) carries 12x the messages - a CPU load its bytes barely show; it stays (the devices
                          fetch their configuration weekly). At 45 %
cdc-snapshot              at minute 20 a Debezium source re-snapshots a database: its 8 tables' change topics (one
                          namespace of default 4 bundles) take the snapshot's rows one table after another, each table's
                          topic carrying 30 % of a broker more (the rows and its 2 sinks' reads) for 15 to 120 minutes by
                          its size; 7 hours in all, once. At 45 %
host-agent-cron           a compliance agent is installed at minute 30 on the hosts of broker-2 and broker-7 (the VMs of
                          a legacy pool) and runs at the top of every hour for 6 minutes, taking 30 % of the host's CPU,
                          which the broker reports (a VM's CPU is the host's): the dag cadence decides during every run.
                          At 45 %
========================= =============================================================================================

Each scenario's criteria are the balance benchmark's, as in the earlier sets: *not_worse*, *no_hot* and *moves*
everywhere; *jitter* where the load comes and goes and leaves every broker below 85 % (cdc-snapshot, host-agent-cron);
none declares *steady*.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Mapping, Sequence

from pulsar_rebalance.simulator.dynamics import Broker, ClusterModel, Event
from pulsar_rebalance.simulator.held_out_scenarios import CADENCES, Expectation, build_from, shaped
from pulsar_rebalance.simulator.held_out_scenarios import HELD_OUT_SCENARIOS as SET_1
from pulsar_rebalance.simulator.held_out_scenarios_2 import HELD_OUT_SCENARIOS_2 as SET_2
from pulsar_rebalance.simulator.held_out_scenarios_2 import DegradedLoadModel, _minutes, churning
from pulsar_rebalance.simulator.held_out_scenarios_3 import DEFAULT_BUNDLES, _add_namespace_topics, _balanced
from pulsar_rebalance.simulator.held_out_scenarios_3 import HELD_OUT_SCENARIOS_3 as SET_3
from pulsar_rebalance.simulator.held_out_scenarios_4 import HELD_OUT_SCENARIOS_4 as SET_4
from pulsar_rebalance.simulator.held_out_scenarios_4 import NAMESPACES, _cluster, _topic
from pulsar_rebalance.simulator.held_out_scenarios_5 import HELD_OUT_SCENARIOS_5 as SET_5
from pulsar_rebalance.simulator.held_out_scenarios_6 import HELD_OUT_SCENARIOS_6 as SET_6
from pulsar_rebalance.simulator.load_models import Load, LoadModel
from pulsar_rebalance.simulator.scenarios import SCENARIOS, ScenarioRun, _bundle_loads, _load, _new_model, _topic_stats

NEVER = float("inf")


def _share(model: ClusterModel, namespaces: Sequence[str]) -> float:
    """``namespaces``' bundles' load over every bundle's (as the scenario helpers measure a bundle's), now."""
    loads = _bundle_loads(model)
    mine = sum(v for b, v in loads.items() if b.split("/0x")[0] in namespaces)
    return mine / sum(loads.values())


def _scale_to_share(model: ClusterModel, namespaces: Sequence[str], share: float) -> None:
    """Scale ``namespaces``' topics' rates so that their bundles carry ``share`` of the load (a few rounds: exact for a
    load model that charges a bundle in proportion to its rates)."""
    for _ in range(4):
        now = _share(model, namespaces)
        factor = share / (1 - share) * (1 - now) / now
        for t in model.topics:
            if t.namespace in namespaces:
                t.base_rate *= factor
        model._update_rates()


# ---------------------------------------------------------------- geo-replication catching up after an outage

GEO_NAMESPACES = ("payments/ledger", "payments/settlements")
"""The replicated tenant's namespaces (``replication_clusters``: this region and the remote one), each created with
Pulsar's default 4 bundles."""
GEO_SHARE = 0.2
"""The replicated namespaces' share of the cluster's load when they replicate as usual (the replicator included)."""
GEO_OUTAGE_MIN = 240
"""How long the remote region was unreachable when the link comes back: the backlog each replicator has to send."""
GEO_RESTORE_MIN = 20
GEO_SPEED = (1.5, 5.0)
"""A replicator's catch-up speed, as a multiple of its topic's publish rate (drawn per topic, uniform): what the link's
share, the remote brokers and the reads of the backlog from BookKeeper allow it. It has caught up after
``GEO_OUTAGE_MIN / (speed - 1)`` minutes: 1 to 8 hours."""
GEO_CYCLES = 180
GEO_LOAD = 0.45


class CatchUpClusterModel(ClusterModel):
    """A :class:`ClusterModel` whose topics ``speeds`` (name -> catch-up speed) are replicated to a remote region: each
    message published is sent once more by the topic's replicator (``msgRateOut`` and ``msgThroughputOut``: Pulsar adds
    a replicator's rates to its topic's, and its topic's to its bundle's stats; the replicator is no consumer). Until
    ``restore`` (simulated minutes) the link is down and nothing is replicated; from ``restore`` each replicator sends
    ``speed`` times its topic's publish rate (its backlog of ``outage`` minutes and the new messages) until it has
    caught up (:meth:`caught_up`), then once (as before the outage). ``restore = -inf``: replicating as usual
    throughout. Made by :func:`catching_up`."""

    speeds: dict[str, float]
    restore: float
    outage: float

    def caught_up(self, topic: str) -> float:
        """The minute ``topic``'s replicator has sent its backlog."""
        return self.restore + self.outage / (self.speeds[topic] - 1.0)

    def replication(self, topic: str, minute: float) -> float:
        """What ``topic``'s replicator sends at ``minute``, per message published."""
        if minute < self.restore:
            return 0.0
        return self.speeds[topic] if minute < self.caught_up(topic) else 1.0

    def _update_rates(self) -> None:
        super()._update_rates()
        speeds = getattr(self, "speeds", None)
        if not speeds:
            return
        now = _minutes(self)
        for t in self.topics:
            if t.name in speeds:
                t.rate_out += t.rate_in * self.replication(t.name, now)


def catching_up(model: ClusterModel, speeds: Mapping[str, float], restore: float, outage: float) -> CatchUpClusterModel:
    """``model`` with topics ``speeds`` replicated, the link down until ``restore`` after an outage of ``outage``
    minutes, each replicator catching up at its speed."""
    model.__class__ = CatchUpClusterModel
    assert isinstance(model, CatchUpClusterModel)
    model.speeds, model.restore, model.outage = dict(speeds), restore, outage
    model._update_rates()
    return model


def geo_replication_catchup(seed: int) -> ScenarioRun:
    """A payments tenant replicates its 2 namespaces to a disaster-recovery region. The inter-region link (or the
    remote cluster) was down for 4 hours: the replicators kept their cursors and the messages piled up in BookKeeper.
    When the link is back every replicator reads its backlog and sends it as fast as it can on top of the new messages
    - the topics' bytes out rise on the brokers owning the tenant's 8 bundles - and each stops catching up once it has
    sent its backlog: the small-speed ones after hours. Then replication is what it was before the outage. The
    publishing, and every other namespace, never change."""
    bundles = {**NAMESPACES, **dict.fromkeys(GEO_NAMESPACES, DEFAULT_BUNDLES)}
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=0, bundles_per_ns=0, n_topics=4000, namespace_bundles=bundles)
    rng = random.Random(f"{seed}:geo-catch-up")
    replicated = sorted(t.name for t in m.topics if t.namespace in GEO_NAMESPACES)
    speeds = {name: rng.uniform(*GEO_SPEED) for name in replicated}
    model = catching_up(m, speeds, -NEVER, GEO_OUTAGE_MIN)  # replicating as usual: the tenant's share
    _scale_to_share(model, GEO_NAMESPACES, GEO_SHARE)
    model.restore = GEO_RESTORE_MIN  # now: the link down since 4 hours
    model._update_rates()
    slowest = GEO_OUTAGE_MIN / (GEO_SPEED[0] - 1.0) / 60
    return _balanced(  # balanced on what the cluster carries now, the link down
        "geo-replication-catchup",
        seed,
        model,
        GEO_LOAD,
        GEO_CYCLES,
        f"{' and '.join(GEO_NAMESPACES)} ({DEFAULT_BUNDLES} bundles each, {GEO_SHARE:.0%} of the traffic replicating) "
        f"not replicated for {GEO_OUTAGE_MIN // 60} h; from minute {GEO_RESTORE_MIN} each replicator sends its backlog "
        f"at {GEO_SPEED[0]:g}-{GEO_SPEED[1]:g}x its publish rate until caught up (up to {slowest:g} h), then as before",
    )


# ---------------------------------------------------------------- a device fleet's messages multiplied

FLEET_NS = "iot/telemetry"
"""The device fleet's namespace: created with Pulsar's default 4 bundles; one topic per device group."""
FLEET_MSG_SIZE = 160.0
"""A telemetry reading: a few metrics and a device id, bytes."""
FLEET_SHARE = 0.015
"""The fleet's share of the cluster's load before the push (a reading a minute per device)."""
FLOOD_MIN = 20
FLOOD_FACTOR = 12.0
"""The fleet's messages after the push, as a multiple of before: a reading every 5 s instead of every minute."""
NEW_GENERATION = {i: (16.0, 2000.0) for i in range(4)}
"""Brokers 0-3: the newer hosts, twice the cores and NIC of brokers 4-9 (8 cores, 1 Gbit/s)."""
FLOOD_CYCLES = 120
FLOOD_LOAD = 0.45


def telemetry_flood(seed: int) -> ScenarioRun:
    """An IoT platform's device fleet reports a reading a minute per device into one namespace's topics, read once by a
    stream processor. A configuration push meant to set the reporting interval to 5 minutes sets 5 seconds (a unit
    mix-up) and every device reports 12 times as often: the namespace's message rate - and its per-message
    CPU - multiplies by 12 while its bytes stay small (160-byte readings), on the brokers owning its 4 bundles, for good
    (the devices fetch their configuration weekly). The cluster has two generations of brokers, balanced by capacity
    before the push: message rates, what Pulsar's placement evens out, are not where the room is."""
    bundles = {**NAMESPACES, FLEET_NS: DEFAULT_BUNDLES}
    m, _ = _new_model(
        seed,
        n_brokers=10,
        n_namespaces=0,
        bundles_per_ns=0,
        n_topics=4000,
        namespace_bundles=bundles,
        big=NEW_GENERATION,
    )
    for t in m.topics:
        if t.namespace == FLEET_NS:  # small readings, one subscription (the stream processor)
            t.msg_size, t.fanout = FLEET_MSG_SIZE, 1.0
    m._update_rates()
    _scale_to_share(m, (FLEET_NS,), FLEET_SHARE)
    run = _balanced(
        "telemetry-flood",
        seed,
        m,
        FLOOD_LOAD,
        FLOOD_CYCLES,
        f"brokers 0-3 with 16 cores and 2 Gbit/s, 4-9 with 8 and 1; from minute {FLOOD_MIN} {FLEET_NS} "
        f"({DEFAULT_BUNDLES} bundles, {FLEET_SHARE:.1%} of the load, {FLEET_MSG_SIZE:g}-byte messages) carries "
        f"{FLOOD_FACTOR:g}x the messages; it stays",
    )
    shaped(m, lambda ns, minutes: FLOOD_FACTOR if ns == FLEET_NS and minutes >= FLOOD_MIN else 1.0)
    return run


# ---------------------------------------------------------------- a CDC source re-snapshotting a database

CDC_NS = "cdc/inventory"
"""The Debezium source's namespace (one change topic per captured table), created with Pulsar's default 4 bundles; it
also holds the other, smaller captured databases' topics."""
CDC_TABLES = (
    ("customers", 20),
    ("products", 15),
    ("orders", 60),
    ("order_lines", 90),
    ("inventory", 30),
    ("payments", 45),
    ("shipments", 40),
    ("audit_log", 120),
)
"""(table, minutes its snapshot takes), in the order the snapshot reads them: the connector reads one table at a
time, at one speed, so a table's minutes follow its rows."""
CDC_MSG_SIZE = 1200.0
"""A Debezium change event (JSON, the row before and after): about 1.2 KB."""
CDC_SINKS = 2.0
"""Subscriptions on every change topic: a search indexer and a data-lake sink."""
CDC_SHARE = 0.02
"""The change topics' streaming traffic (every table's changes), as a fraction of the rest of the cluster's."""
CDC_START_MIN = 20
CDC_EXTRA = 0.3
"""The load the snapshot adds to the table's topic it is reading (its rows published, and read by both sinks), as a
fraction of a standard broker's."""
CDC_CYCLES = 180
CDC_LOAD = 0.45


def cdc_topic(table: str) -> str:
    """The change topic of ``table`` (Debezium's ``<server>.<database>.<table>``)."""
    return f"persistent://{CDC_NS}/dbserver1.inventory.{table}"


def snapshot_windows() -> list[tuple[str, int, int]]:
    """(topic, first minute, minute after the last) of each table's snapshot, in order."""
    out, start = [], CDC_START_MIN
    for table, minutes in CDC_TABLES:
        out.append((cdc_topic(table), start, start + minutes))
        start += minutes
    return out


def cdc_snapshot(seed: int) -> ScenarioRun:
    """A team adds a sink that needs the full tables and triggers a Debezium incremental snapshot of the inventory
    database (or the connector's offsets were lost): the connector reads each table in turn and publishes every row
    into the table's change topic as fast as the database gives them, beside the live changes; both sinks read it.
    The load walks from one table's topic - one topic, on whichever broker owns its bundle - to the next, for 7 hours,
    then the topics carry their changes as before."""
    windows = snapshot_windows()
    starts = [Event(a, "burst", topic=topic, factor=1.0) for topic, a, _ in windows]
    ends = [Event(b, "burst", topic=topic, factor=1.0) for topic, _, b in windows]
    m, phase = _cluster(seed, CDC_NS, DEFAULT_BUNDLES, [*starts, *ends])
    tables = [_topic(cdc_topic(table), CDC_MSG_SIZE, CDC_SINKS, phase, 1) for table, _ in CDC_TABLES]
    _add_namespace_topics(m, tables, CDC_SHARE)
    last = windows[-1][2]
    run = _balanced(  # churning with no lifetimes: the change topics indexed into their bundles, all live throughout
        "cdc-snapshot",
        seed,
        churning(m, {}),
        CDC_LOAD,
        CDC_CYCLES,
        f"from minute {CDC_START_MIN} a Debezium snapshot reads {len(CDC_TABLES)} tables in turn, each table's change "
        f"topic in {CDC_NS} ({DEFAULT_BUNDLES} bundles) carrying {CDC_EXTRA:.0%} of a broker more for "
        f"{min(n for _, n in CDC_TABLES)}-{max(n for _, n in CDC_TABLES)} min; over at minute {last}, once",
    )
    for event in starts:  # calibrated at minute 0: the topic's load, plus the snapshot's
        t = m._by_name[event.topic or ""]
        event.factor = 1.0 + CDC_EXTRA / _load(m, _topic_stats(t))
    return run


# ---------------------------------------------------------------- an hourly agent on two brokers' hosts

AGENT_BROKERS = ("broker-2:8080", "broker-7:8080")
"""The brokers on the legacy pool's VMs, where the agent is installed."""
AGENT_INSTALLED_MIN = 30
AGENT_EVERY_MIN = 60
AGENT_RUN_MIN = 6
AGENT_CPU = 0.3
"""The agent's CPU while it runs, as a fraction of the host's (its scanner threads: a third of the vCPUs, busy)."""
AGENT_CYCLES = 150
AGENT_LOAD = 0.45


class HostAgentLoadModel(DegradedLoadModel):
    """A load model (``base``) under which the hosts of ``brokers`` spend ``share`` of their CPU on an agent (a scanner,
    a backup) from ``installed`` (simulated minutes) on, at the top of every hour (every ``every`` minutes from the
    first hour after it is installed) for ``run`` minutes. A broker on a VM reports the host's CPU (Pulsar's
    ``LinuxBrokerHostUsageImpl`` reads ``/proc/stat`` outside a container): its reported CPU carries the agent's, which
    no bundle's rates show; its limits, NICs and every other broker are the base model's. The metrics see what the
    broker reports (the agent's CPU is on the host the broker runs on); the ideal is the base model's (the agent is no
    load a placement can spread). Everything else is the base model's, as
    :class:`~pulsar_rebalance.simulator.held_out_scenarios_2.DegradedLoadModel`'s."""

    def __init__(
        self, base: LoadModel, brokers: Sequence[str], share: float, installed: float, every: float, run: float
    ) -> None:
        super().__init__(base, brokers[0], 1.0, installed)
        self.agent_brokers = frozenset(brokers)
        self.agent_cpu, self.installed, self.every, self.run_min = share, installed, every, run
        self.description = (
            f"{base.description}; {', '.join(sorted(brokers))} spend {share:g} of their CPU on an agent "
            f"{run:g} min every {every:g} min from minute {installed:g}"
        )

    def degraded(self, broker: Broker) -> bool:
        return False  # capacity unchanged: the agent adds CPU, it does not take cores away

    def first_run(self) -> float:
        """The minute of the agent's first run: the first top of the hour after it is installed."""
        return -(-self.installed // self.every) * self.every

    def running(self, broker_id: str, minute: float | None = None) -> bool:
        """Whether the agent runs on ``broker_id``'s host at ``minute`` (default: now)."""
        now = self.clock() if minute is None else minute
        first = self.first_run()
        return broker_id in self.agent_brokers and now >= first and (now - first) % self.every < self.run_min

    def usage(self, broker: Broker, load: Load) -> dict[str, dict[str, float]]:
        shown = self.base.usage(broker, load)
        if not self.running(broker.broker_id):
            return shown
        out = {k: dict(v) for k, v in shown.items()}
        out["cpu"]["usage"] += self.agent_cpu * out["cpu"]["limit"]
        return out


def host_agent_cron(seed: int) -> ScenarioRun:
    """Security mandates a compliance agent (file integrity and malware scans) on the legacy VM pool, where broker-2 and
    broker-7 run: a cron job at the top of every hour that keeps a third of the host's vCPUs busy for 6 minutes. The
    brokers report the host's CPU, so theirs jumps 30 points every hour, their bundles and rates unchanged; the DAG's
    ``@hourly`` schedule decides at the top of the hour, during every run of the agent."""
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=8, bundles_per_ns=16, n_topics=4000)
    agent = HostAgentLoadModel(
        m.load_model, AGENT_BROKERS, AGENT_CPU, AGENT_INSTALLED_MIN, AGENT_EVERY_MIN, AGENT_RUN_MIN
    )
    agent.clock = lambda: _minutes(m)
    m.load_model = agent
    return _balanced(
        "host-agent-cron",
        seed,
        m,
        AGENT_LOAD,
        AGENT_CYCLES,
        f"from minute {AGENT_INSTALLED_MIN} an agent on the hosts of "
        f"{' and '.join(b.split(':')[0] for b in AGENT_BROKERS)} takes {AGENT_CPU:.0%} of their CPU for "
        f"{AGENT_RUN_MIN} min at the top of every hour (minutes {agent.first_run():g}, "
        f"{agent.first_run() + AGENT_EVERY_MIN:g}, ...), bundles and rates unchanged",
    )


HELD_OUT_SCENARIOS_7: Mapping[str, Callable[[int], ScenarioRun]] = {
    "geo-replication-catchup": geo_replication_catchup,
    "telemetry-flood": telemetry_flood,
    "cdc-snapshot": cdc_snapshot,
    "host-agent-cron": host_agent_cron,
}

ALWAYS = ("not_worse", "no_hot", "moves")
COMES_AND_GOES = ("not_worse", "no_hot", "jitter", "moves")

EXPECTATIONS_7: Mapping[str, Expectation] = {
    "geo-replication-catchup": Expectation(
        "a tenant's 2 replicated namespaces (default 4 bundles each, 20 % of the traffic with their replication) were "
        "cut off from the remote region for 4 hours; from minute 20 every replicator sends its backlog at 1.5x to 5x "
        "its topic's publish rate until it has caught up (1 to 8 hours, by topic), then replicates as before",
        ALWAYS,
        "the brokers owning the tenant's 8 bundles send far more for hours - longer than the minute cadence's run - "
        "and the surge fades topic by topic: bring them back in line while it lasts, without pushing a broker over 85 "
        "% and with moves in proportion; once every replicator has caught up (the dag cadence's second day) the "
        "tenant's bundles carry their usual replication, and what was moved for the surge must not leave the cluster "
        "worse than doing nothing",
    ),
    "telemetry-flood": Expectation(
        "a two-generation cluster (brokers 0-3 with twice the cores and NIC of 4-9), balanced by capacity; from minute "
        "20 a device fleet's namespace (default 4 bundles, 1.5 % of the load, 160-byte messages) carries 12x the "
        "messages - CPU its bytes barely show; it stays",
        ALWAYS,
        "the brokers owning the fleet's 4 bundles carry its message rate's CPU for good: relieve them (moving the "
        "fleet's bundles, or splitting them - one topic per device group - and spreading the pieces, or moving what "
        "else they hold) by capacity - a big broker takes twice what a small one does, and a small one is not where "
        "message rates say the room is - without pushing a broker over 85 % and with moves in proportion",
    ),
    "cdc-snapshot": Expectation(
        "from minute 20 a Debezium snapshot reads 8 tables in turn: each table's change topic (one namespace of "
        "default 4 bundles) carries 30 % of a broker more for 15 to 120 minutes, by the table's size; 7 hours in all, "
        "once",
        COMES_AND_GOES,
        "the load walks from one topic - unsplittable - to the next on whichever broker owns its bundle, and leaves "
        "every broker below 85 % (but under the convex CPU curve, where the table's broker reads over 85 % while the "
        "table lasts): a move made for one table is useless for the next and wrong once the snapshot is over, so at "
        "most 2 moves a simulated day, ending no higher than doing nothing",
    ),
    "host-agent-cron": Expectation(
        "from minute 30 an agent takes 30 % of broker-2's and broker-7's hosts' CPU for 6 minutes at the top of every "
        "hour (first at minute 60), their bundles and rates unchanged: the dag cadence decides during every run",
        COMES_AND_GOES,
        "the two brokers' CPU jumps for 6 minutes an hour, none of it their bundles', and leaves every broker below 85 "
        "%: moving load off them for it leaves them light the other 54 minutes of every hour; shifting a little once "
        "is the most a balancer does, so at most 2 moves a simulated day (though every hourly decision sees the jump), "
        "ending no higher than doing nothing",
    ),
}
"""Each scenario's description and declared criteria, written with the scenarios, before any strategy ran on them."""


build = functools.partial(build_from, HELD_OUT_SCENARIOS_7)
"""``build(name, seed=0, *, load_model=None, noise=None, rate_noise=0.0, cadence="minute")``: the named scenario of the
seventh held-out set for ``seed`` (``KeyError`` lists the known names), as the first set's
:func:`~pulsar_rebalance.simulator.held_out_scenarios.build`; ``cadence`` is checked and passed on as in the earlier
sets, and no scenario of this set depends on it."""


assert not set(HELD_OUT_SCENARIOS_7) & set(SCENARIOS), "a held-out scenario shares a name with a tuned-on one"
assert not set(HELD_OUT_SCENARIOS_7) & set(SET_1), "a scenario of the seventh set shares a name with the first's"
assert not set(HELD_OUT_SCENARIOS_7) & set(SET_2), "a scenario of the seventh set shares a name with the second's"
assert not set(HELD_OUT_SCENARIOS_7) & set(SET_3), "a scenario of the seventh set shares a name with the third's"
assert not set(HELD_OUT_SCENARIOS_7) & set(SET_4), "a scenario of the seventh set shares a name with the fourth's"
assert not set(HELD_OUT_SCENARIOS_7) & set(SET_5), "a scenario of the seventh set shares a name with the fifth's"
assert not set(HELD_OUT_SCENARIOS_7) & set(SET_6), "a scenario of the seventh set shares a name with the sixth's"
assert set(EXPECTATIONS_7) == set(HELD_OUT_SCENARIOS_7)

__all__ = [
    "CADENCES",
    "EXPECTATIONS_7",
    "HELD_OUT_SCENARIOS_7",
    "CatchUpClusterModel",
    "HostAgentLoadModel",
    "build",
    "catching_up",
    "cdc_topic",
    "snapshot_windows",
]
