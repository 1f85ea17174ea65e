"""Held-out scenarios, sixth set: kept in reserve until its first run (cores `975ca377c1` and `80f8646aa0`: identical there).

Written as the earlier sets were (:mod:`~pulsar_rebalance.simulator.held_out_scenarios_5`): without reading the
planner (neither its code under ``core/``, nor its design notes and history, nor its tests) nor any benchmark report
(neither the reports nor their JSON nor the READMEs' headlines), from how Pulsar places and serves load and what
operators report (the reference on Pulsar's load manager; the operators' complaints of ``peers.md``: a broker left
idle after a restart, #12160, #13119; brokers that cannot reach a balanced state after restarts, #21174; the rolling
restart procedure of ``administration-rolling-restart.md``), and developed with doing nothing and Pulsar's own
strategies only; each scenario's criteria (:data:`EXPECTATIONS_6`) were declared with it, before any strategy ran on
it, and its magnitudes (the loads, the shares, the timings) set on doing nothing alone.
``benchmarks/bench_held_out_scenarios.py --set 6`` runs it; its first full run is the measure of the planner change
that follows. It reuses the earlier sets' machinery (:func:`~pulsar_rebalance.simulator.held_out_scenarios_2.churning`'s
topics that exist only part of the run, :func:`~pulsar_rebalance.simulator.held_out_scenarios_3._add_namespace_topics`
and the calibration to an exact load, :func:`~pulsar_rebalance.simulator.held_out_scenarios_4._cluster`'s cluster and
its scenario topics) and :mod:`~pulsar_rebalance.simulator.scenarios`' helpers, and changes none of the simulator's
modules: the restarts are the cluster model's own ``restart`` events; what the existing models cannot say is said by
subclasses of them (:class:`OffboardedClusterModel`: namespaces deleted mid-run; :class:`ReplayClusterModel`: one
subscription reading a backlog; :class:`LinkDownClusterModel`: brokers whose NIC limit halves).

Time is simulated minutes since the start, as in the earlier sets: ``run.cycles`` one-minute decisions at the
``minute`` cadence, ``run.dag_decisions`` (48: two days) hourly ones at the ``dag`` cadence. No profile here spans the
run: every scenario is the same at both cadences (the dag cadence decides at minutes 0, 60, 120, ...).

=================== ===================================================================================================
tenant-offboarding  a large tenant (2 namespaces of Pulsar's default 4 bundles, 30 % of the traffic) moves to a
                    cluster of its own: at minute 20 its namespaces are deleted (topics and bundles gone); the brokers
                    that held its bundles lose their share of it, the others keep all of theirs. At 50 % before
rolling-upgrade     every broker is upgraded in turn, one every 8 minutes from minute 10, each down 5 minutes (a long
                    restart: the JVM, ZooKeeper session, its first load report): lookup re-places its bundles on the
                    others by message rate and it comes back empty; the last is back at minute 87. At 50 %
subscription-replay at minute 20 a consumer group resets its subscription on one topic 3 days back (``reset-cursor``)
                    and reads the backlog from BookKeeper at catch-up speed: the topic's dispatch (bytes out) rises by
                    25 % of a broker for 6 hours, its publishing unchanged. At 40 %
nic-link-down       at minute 20 a top-of-rack switch port fails: broker-4 and broker-5 each lose one of the two links
                    of their bonded NIC, whose reported limit halves (their cores do not change); it stays until the
                    switch is replaced, after the run. At 40 %
=================== ===================================================================================================

Each scenario's criteria are the balance benchmark's, as in the earlier sets: *not_worse*, *no_hot* and *moves*
everywhere; none of this set's declares *steady* or *jitter* (in each something happens that stays, or stays for
hours, which moves can fix).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from pulsar_rebalance.simulator.dynamics import ClusterModel, Event
from pulsar_rebalance.simulator.held_out_scenarios import CADENCES, Expectation, build_from
from pulsar_rebalance.simulator.held_out_scenarios import HELD_OUT_SCENARIOS as SET_1
from pulsar_rebalance.simulator.held_out_scenarios_2 import HELD_OUT_SCENARIOS_2 as SET_2
from pulsar_rebalance.simulator.held_out_scenarios_2 import ChurningClusterModel, _minutes, churning
from pulsar_rebalance.simulator.held_out_scenarios_3 import DEFAULT_BUNDLES, NEVER, _add_namespace_topics, _balanced
from pulsar_rebalance.simulator.held_out_scenarios_3 import HELD_OUT_SCENARIOS_3 as SET_3
from pulsar_rebalance.simulator.held_out_scenarios_4 import HELD_OUT_SCENARIOS_4 as SET_4
from pulsar_rebalance.simulator.held_out_scenarios_4 import NAMESPACES, _cluster, _topic
from pulsar_rebalance.simulator.held_out_scenarios_5 import HELD_OUT_SCENARIOS_5 as SET_5
from pulsar_rebalance.simulator.scenarios import SCENARIOS, ScenarioRun, _load, _new_model

# ---------------------------------------------------------------- a tenant offboarded

OFFBOARD_NAMESPACES = ("retail/orders", "retail/inventory")
"""The leaving tenant's namespaces, each created with Pulsar's default 4 bundles."""
OFFBOARD_SHARE = 0.3
"""The tenant's traffic, as a fraction of the cluster's."""
OFFBOARD_MIN = 20
OFFBOARD_CYCLES = 90
OFFBOARD_LOAD = 0.5


class OffboardedClusterModel(ChurningClusterModel):
    """A :class:`~pulsar_rebalance.simulator.held_out_scenarios_2.ChurningClusterModel` whose namespaces ``deleted``
    (namespace -> minute) are deleted at their minute (``pulsar-admin namespaces delete``): their bundles go (no owner,
    no stats), as their topics do (their lifetimes end then). Made by :func:`offboarded`."""

    deleted: dict[str, float]

    def _update_rates(self) -> None:
        super()._update_rates()
        deleted = getattr(self, "deleted", None)
        if not deleted:
            return
        now = _minutes(self)
        for ns in sorted(n for n, minute in deleted.items() if minute <= now and n in self.namespaces):
            prefix = f"{ns}/"
            for bundle in [b for b in self.owners if b.startswith(prefix)]:
                del self.owners[bundle]
            del self.namespaces[ns]


def offboarded(model: ClusterModel, deleted: Mapping[str, float]) -> OffboardedClusterModel:
    """``model`` with namespaces ``deleted`` (namespace -> minute) and their topics gone at their minutes."""
    lifetimes = {t.name: (-NEVER, deleted[t.namespace]) for t in model.topics if t.namespace in deleted}
    churned = churning(model, lifetimes)
    churned.__class__ = OffboardedClusterModel
    assert isinstance(churned, OffboardedClusterModel)
    churned.deleted = dict(deleted)
    churned._update_rates()
    return churned


def tenant_offboarding(seed: int) -> ScenarioRun:
    """A large tenant migrates to a dedicated cluster: once its clients have moved, its namespaces are deleted. Its
    traffic was spread as everything else's was (its 8 bundles, among the largest of the cluster, on 7 or 8 of the 10
    brokers); what goes, goes from those, and the others keep all they had. Nothing else changes."""
    bundles = {**NAMESPACES, **dict.fromkeys(OFFBOARD_NAMESPACES, DEFAULT_BUNDLES)}
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=0, bundles_per_ns=0, n_topics=4000, namespace_bundles=bundles)
    tenant = [t for t in m.topics if t.namespace in OFFBOARD_NAMESPACES]
    mine = sum(t.base_rate for t in tenant)
    rest = sum(t.base_rate for t in m.topics) - mine
    for t in tenant:  # the tenant's share of the traffic, exactly
        t.base_rate *= OFFBOARD_SHARE / (1 - OFFBOARD_SHARE) * rest / mine
    m._update_rates()
    return _balanced(
        "tenant-offboarding",
        seed,
        offboarded(m, dict.fromkeys(OFFBOARD_NAMESPACES, float(OFFBOARD_MIN))),
        OFFBOARD_LOAD,
        OFFBOARD_CYCLES,
        f"{' and '.join(OFFBOARD_NAMESPACES)} ({DEFAULT_BUNDLES} bundles each, {OFFBOARD_SHARE:.0%} of the traffic) "
        f"deleted at minute {OFFBOARD_MIN}: topics and bundles gone",
    )


# ---------------------------------------------------------------- every broker upgraded in turn

UPGRADE_START_MIN = 10
UPGRADE_EVERY_MIN = 8
UPGRADE_DOWN_MIN = 5
"""Minutes a broker is down (its bundles re-placed by lookup at once) before it is back, empty."""
UPGRADE_BROKERS = 10
UPGRADE_CYCLES = 150
UPGRADE_LOAD = 0.5


def upgrade_events() -> list[Event]:
    """Each broker restarts in turn (``restart``: its bundles re-placed by lookup, itself back ``delay`` later)."""
    return [
        Event(UPGRADE_START_MIN + i * UPGRADE_EVERY_MIN, "restart", broker=f"broker-{i}:8080", delay=UPGRADE_DOWN_MIN)
        for i in range(UPGRADE_BROKERS)
    ]


def rolling_upgrade(seed: int) -> ScenarioRun:
    """An operator upgrades Pulsar on every broker, one at a time, as the rolling restart procedure says: each broker
    shuts down (lookup re-places its bundles on the others by message rate, blind to bytes and to the brokers still to
    restart), takes 5 minutes to come back, and is back empty; the next follows 8 minutes after the previous one.
    Nothing else changes: the traffic is what it was, where it is is lookup's doing."""
    m, _ = _new_model(
        seed, n_brokers=UPGRADE_BROKERS, n_namespaces=8, bundles_per_ns=16, n_topics=4000, events=upgrade_events()
    )
    last = UPGRADE_START_MIN + (UPGRADE_BROKERS - 1) * UPGRADE_EVERY_MIN + UPGRADE_DOWN_MIN
    return _balanced(
        "rolling-upgrade",
        seed,
        m,
        UPGRADE_LOAD,
        UPGRADE_CYCLES,
        f"all {UPGRADE_BROKERS} brokers restarted in turn, one every {UPGRADE_EVERY_MIN} min from minute "
        f"{UPGRADE_START_MIN}, each down {UPGRADE_DOWN_MIN} min and back empty (the last at minute {last})",
    )


# ---------------------------------------------------------------- a subscription reset days back

REPLAY_NS = "analytics/clickstream"
REPLAY_TOPIC = f"persistent://{REPLAY_NS}/page-views"
REPLAY_SHARE = 0.05
"""The topic's load before the replay, as a fraction of a standard broker's (its publishing and one subscription)."""
REPLAY_MIN = 20
REPLAY_HOURS = 6
REPLAY_EXTRA = 0.25
"""The load the replaying subscription's dispatch adds to the topic, as a fraction of a standard broker's."""
REPLAY_CYCLES = 90
REPLAY_LOAD = 0.4


class ReplayClusterModel(ChurningClusterModel):
    """A :class:`~pulsar_rebalance.simulator.held_out_scenarios_2.ChurningClusterModel` (its topics all live: the
    scenario's own indexed into their bundles) where topic ``replayed`` has ``extra`` more fan-out (one subscription dispatching
    ``extra`` times its publish rate: a backlog read at catch-up speed) from ``start`` to ``end`` (simulated minutes),
    its publishing unchanged. Made by :func:`replaying`."""

    replayed: str
    start: float
    end: float
    extra: float
    base_fanout: float

    def _update_rates(self) -> None:
        replayed = getattr(self, "replayed", None)
        if replayed is not None:
            self._by_name[replayed].fanout = self.base_fanout + (self.extra if self.replay_on() else 0.0)
        super()._update_rates()

    def replay_on(self) -> bool:
        """Whether the subscription reads its backlog now."""
        return self.start <= _minutes(self) < self.end


def replaying(model: ClusterModel, topic: str, start: float, end: float) -> ReplayClusterModel:
    """``model`` with topic ``topic``'s backlog replayed from ``start`` to ``end`` (no extra fan-out until
    :func:`subscription_replay` calibrates it)."""
    replay = churning(model, {})  # the topic added indexed into its bundle, live throughout
    replay.__class__ = ReplayClusterModel
    assert isinstance(replay, ReplayClusterModel)
    replay.replayed, replay.start, replay.end, replay.extra = topic, start, end, 0.0
    replay.base_fanout = replay._by_name[topic].fanout
    replay._update_rates()
    return replay


def subscription_replay(seed: int) -> ScenarioRun:
    """A team fixes a bug in its consumer and reprocesses the last 3 days: ``pulsar-admin topics reset-cursor --time
    3d`` on its subscription to one (non-partitioned) topic. The subscription reads the backlog from BookKeeper as
    fast as its consumers take it, for hours: the topic's broker sends a quarter of a broker more, for 6 hours; the
    topic - one topic, which no split divides - publishes as before, and nothing else changes."""
    m, phase = _cluster(seed, REPLAY_NS, 16)
    topic = _topic(REPLAY_TOPIC, 1024.0, 1.0, phase, 4)
    _add_namespace_topics(m, [topic], REPLAY_SHARE / (len(m.brokers) * REPLAY_LOAD))
    model = replaying(m, REPLAY_TOPIC, REPLAY_MIN, REPLAY_MIN + REPLAY_HOURS * 60)
    run = _balanced(
        "subscription-replay",
        seed,
        model,
        REPLAY_LOAD,
        REPLAY_CYCLES,
        f"from minute {REPLAY_MIN} one subscription of {REPLAY_TOPIC} replays 3 days of backlog at catch-up speed: "
        f"its dispatch adds {REPLAY_EXTRA:.0%} of a broker for {REPLAY_HOURS} h",
    )
    t = model._by_name[REPLAY_TOPIC]
    one = {  # one more subscription at the topic's publish rate now: bytes and messages out only
        "msgRateIn": 0.0,
        "msgRateOut": t.rate_in,
        "msgThroughputIn": 0.0,
        "msgThroughputOut": t.rate_in * t.msg_size,
    }
    model.extra = REPLAY_EXTRA / _load(model, one)  # calibrated at minute 0: the replay's load, in subscriptions
    model._update_rates()
    return run


# ---------------------------------------------------------------- a bonded NIC losing one of its links

LINK_DOWN = ("broker-4:8080", "broker-5:8080")
"""The brokers on the failed switch's ports (the same rack)."""
LINK_MIN = 20
LINK_LEFT = 0.5
"""The NIC's limit left once one of the bond's two links is down."""
LINK_CYCLES = 90
LINK_LOAD = 0.4


class LinkDownClusterModel(ClusterModel):
    """A :class:`ClusterModel` whose brokers ``degraded`` have ``left`` of their NIC limit from ``from_minute`` on (a
    bond's speed is its live links': the broker reports the lower limit), their cores unchanged. Made by
    :func:`link_down`."""

    degraded: dict[str, float]
    """Broker -> its NIC (Mbit/s) before the failure, as the load model configured it."""
    from_minute: float
    left: float

    def _update_rates(self) -> None:
        degraded = getattr(self, "degraded", None)
        if degraded is not None:
            down = _minutes(self) >= self.from_minute
            for b, nic in degraded.items():
                self.brokers[b].nic_mbps = nic * (self.left if down else 1.0)
        super()._update_rates()


def link_down(model: ClusterModel, brokers: tuple[str, ...], from_minute: float, left: float) -> LinkDownClusterModel:
    """``model`` with ``brokers``' NIC limits at ``left`` of theirs from ``from_minute`` on."""
    model.__class__ = LinkDownClusterModel
    assert isinstance(model, LinkDownClusterModel)
    model.degraded = {b: model.brokers[b].nic_mbps for b in brokers}
    model.from_minute, model.left = from_minute, left
    model._update_rates()
    return model


def nic_link_down(seed: int) -> ScenarioRun:
    """Brokers on a rack are cabled with two bonded links each, to two ports of the top-of-rack switch; one port group
    fails, and broker-4 and broker-5 run on one link: the NIC limit they report (the bond's speed) halves, their CPU
    does not change, and neither does the traffic. The switch is replaced after the run: the halved NICs stay."""
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=8, bundles_per_ns=16, n_topics=4000)
    return _balanced(
        "nic-link-down",
        seed,
        link_down(m, LINK_DOWN, LINK_MIN, LINK_LEFT),
        LINK_LOAD,
        LINK_CYCLES,
        f"from minute {LINK_MIN} {' and '.join(b.split(':')[0] for b in LINK_DOWN)} report {LINK_LEFT:.0%} of their "
        "NIC limit (a bonded link down), cores unchanged; it stays",
    )


HELD_OUT_SCENARIOS_6: Mapping[str, Callable[[int], ScenarioRun]] = {
    "tenant-offboarding": tenant_offboarding,
    "rolling-upgrade": rolling_upgrade,
    "subscription-replay": subscription_replay,
    "nic-link-down": nic_link_down,
}

ALWAYS = ("not_worse", "no_hot", "moves")

EXPECTATIONS_6: Mapping[str, Expectation] = {
    "tenant-offboarding": Expectation(
        "a tenant's 2 namespaces (default 4 bundles each, 30 % of the traffic) are deleted at minute 20: the brokers "
        "that held its bundles lose their share of it, the others keep all of theirs",
        ALWAYS,
        "the brokers that held none of the tenant's bundles stay where they were while the cluster's average falls by "
        "nearly a third, for good: even it out by moving some of their bundles to the brokers the tenant left "
        "(nothing is near the overload line, so a few moves, in proportion, are the most it takes), ending no higher "
        "than doing nothing",
    ),
    "rolling-upgrade": Expectation(
        "all 10 brokers restarted in turn, one every 8 minutes from minute 10, each down 5 minutes: lookup re-places "
        "its bundles by message rate and it comes back empty; the last is back at minute 87",
        ALWAYS,
        "while the upgrade runs every broker is about to restart or just back, and a bundle moved now may move again "
        "when its broker restarts; once it is over, the load is where lookup put it - the last broker back empty, "
        "others heavier, none of it placed by bytes - for good: even it out, without pushing a broker over 85 % and "
        "with moves in proportion",
    ),
    "subscription-replay": Expectation(
        "from minute 20 one subscription of one topic is reset 3 days back and reads its backlog at catch-up speed: "
        "the topic's dispatch adds 25 % of a broker for 6 hours (longer than the minute cadence's run), its "
        "publishing unchanged",
        ALWAYS,
        "one broker sends a quarter of a broker more for hours, and no split divides a topic: bring it back in line by "
        "moving what else it holds (or splitting the topic's bundle and moving its other topics), without pushing a "
        "broker over 85 % and with moves in proportion; when the replay ends at the dag cadence, that broker is "
        "lighter, not hot, and nothing must follow it",
    ),
    "nic-link-down": Expectation(
        "from minute 20 broker-4 and broker-5 report half their NIC limit (one link of a bonded pair down), their "
        "cores and the traffic unchanged; it stays",
        ALWAYS,
        "where the NIC binds, the two brokers' bandwidth usage doubles against the limit they now report, for good: "
        "move load off them until they carry half of what the others do on the NIC, without pushing a broker over 85 "
        "% and with moves in proportion; where the CPU binds (10 Gbit/s NICs) half a NIC is still plenty and nothing "
        "needs to move",
    ),
}
"""Each scenario's description and declared criteria, written with the scenarios, before any strategy ran on them."""


build = functools.partial(build_from, HELD_OUT_SCENARIOS_6)
"""``build(name, seed=0, *, load_model=None, noise=None, rate_noise=0.0, cadence="minute")``: the named scenario of the
sixth held-out set for ``seed`` (``KeyError`` lists the known names), as the first set's
:func:`~pulsar_rebalance.simulator.held_out_scenarios.build`; ``cadence`` is checked and passed on as in the earlier
sets, and no scenario of this set depends on it."""


assert not set(HELD_OUT_SCENARIOS_6) & set(SCENARIOS), "a held-out scenario shares a name with a tuned-on one"
assert not set(HELD_OUT_SCENARIOS_6) & set(SET_1), "a scenario of the sixth set shares a name with the first's"
assert not set(HELD_OUT_SCENARIOS_6) & set(SET_2), "a scenario of the sixth set shares a name with the second's"
assert not set(HELD_OUT_SCENARIOS_6) & set(SET_3), "a scenario of the sixth set shares a name with the third's"
assert not set(HELD_OUT_SCENARIOS_6) & set(SET_4), "a scenario of the sixth set shares a name with the fourth's"
assert not set(HELD_OUT_SCENARIOS_6) & set(SET_5), "a scenario of the sixth set shares a name with the fifth's"
assert set(EXPECTATIONS_6) == set(HELD_OUT_SCENARIOS_6)

__all__ = [
    "CADENCES",
    "EXPECTATIONS_6",
    "HELD_OUT_SCENARIOS_6",
    "build",
    "link_down",
    "offboarded",
    "replaying",
    "upgrade_events",
]
