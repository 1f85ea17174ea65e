"""Held-out scenarios, third set: kept in reserve until its first run, on core `c7b68e1f03` (the change it measured).

Written as the second set was (:mod:`~pulsar_rebalance.simulator.held_out_scenarios_2`): without reading the planner
(neither its code under ``core/planner/``, nor its design notes and history, nor its tests) nor any benchmark report,
from how Pulsar places and sheds load and what operators report, and developed with doing nothing and Pulsar's own
strategies only; each scenario's criteria (:data:`EXPECTATIONS_3`) were declared with it, before any strategy ran on
it, and its magnitudes (the loads, the new traffic's share) set on doing nothing alone. ``benchmarks/bench_held_out_scenarios.py --set 3`` runs it; its first full run is the measure of the planner change
that follows. It reuses the first two sets' machinery (:func:`~pulsar_rebalance.simulator.held_out_scenarios.shaped`'s
model, :func:`~pulsar_rebalance.simulator.held_out_scenarios_2.churning`'s topics that exist only part of the run, the
calibration to an exact load) and :mod:`~pulsar_rebalance.simulator.scenarios`' helpers, and changes none of the
simulator's modules: what the existing models cannot say is said by subclasses of them
(:class:`ArrivingClusterModel`: namespaces created mid-run, their bundles placed as Pulsar's lookup places a new
namespace's; :class:`SubscribedClusterModel`: subscriptions added to existing topics).

Where Pulsar's placement matters, it is Pulsar's (the reference on Pulsar's load manager, section 4):
``ModularLoadManagerImpl.selectBrokerForAssignment`` keeps the brokers owning the fewest bundles of the namespace
(``removeMostServicingBrokersForNamespace``: a namespace's bundles spread one a broker), then
``LeastLongTermMessageRate`` picks the least long-term message rate among the brokers not overloaded, a bundle never
seen before weighing Pulsar's default ``BundleData`` (50 msg/s in, 50 out) - blind to bytes, to broker size and to
the traffic the new bundle will bring.

Time is simulated minutes since the start, as in the first two sets: ``run.cycles`` one-minute decisions at the
``minute`` cadence, ``run.dag_decisions`` (48: two days) hourly ones at the ``dag`` cadence. No profile here spans the
run: every scenario is the same at both cadences (the dag cadence sees the first hour's events at its second decision).

====================== ==================================================================================================
namespace-onboarding   a new tenant's namespace (Pulsar's default 4 bundles, its traffic a quarter of the existing) is
                       created at minute 15: lookup puts its 4 bundles on the 4 brokers with the least message rate, one
                       each; its producers ramp up over 30 minutes and stay. At 40 %, 50 % once onboarded
new-subscription       at minute 20 two new subscriptions (a CDC sink, an analytics job) attach to every topic of one
                       namespace created with Pulsar's default 4 bundles: its dispatch (messages and bytes out, and
                       consumers) grows by 2 messages out per message in, its publishing unchanged; it stays. At 45 %
over-split-namespace   balanced at 55 %, and a namespace whose traffic has moved away (0.2 % of the load left) still
                       holds 128 bundles (``loadBalancerNamespaceMaximumBundles``: it was split to the cap when it was
                       hot; Pulsar cannot merge bundles), all on broker-0 and broker-1: bundle counts 6x uneven, load not
perf-test-namespace    an operator runs ``pulsar-perf`` on a fresh namespace (default 4 bundles, 100 topics at one rate,
                       one subscription each) from minute 30 to minute 75, placed by lookup, then deletes its topics;
                       15 % more traffic while it runs; once. At 45 %
====================== ==================================================================================================

Each scenario's criteria are the balance benchmark's, as in the first two sets: *not_worse*, *no_hot* and *moves*
everywhere; *steady* where nothing a move can fix happens (over-split-namespace), *jitter* where the load comes and
goes (perf-test-namespace).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Mapping, Sequence

from pulsar_rebalance.core.pulsar.bundles import NamespaceBundles, bundle_full_name, topic_hash
from pulsar_rebalance.simulator.dynamics import ClusterModel, Topic
from pulsar_rebalance.simulator.held_out_scenarios import (
    CADENCES,
    Expectation,
    Shape,
    ShapedClusterModel,
    _calibrate_to,
    _ids,
    build_from,
)
from pulsar_rebalance.simulator.held_out_scenarios import HELD_OUT_SCENARIOS as SET_1
from pulsar_rebalance.simulator.held_out_scenarios_2 import HELD_OUT_SCENARIOS_2 as SET_2
from pulsar_rebalance.simulator.held_out_scenarios_2 import (
    ChurningClusterModel,
    _calibrate_across,
    _minutes,
    churning,
)
from pulsar_rebalance.simulator.scenarios import (
    SCENARIOS,
    ScenarioRun,
    _bundle_loads,
    _load,
    _new_model,
    _place_balanced,
    _topic_stats,
    _topics,
)

DEFAULT_BUNDLES = 4
"""Pulsar's ``defaultNumberOfNamespaceBundles``: the bundles a namespace is created with."""
DEFAULT_BUNDLE_MSG_RATE = 100.0
"""What lookup counts for a bundle it has no data of: Pulsar's default ``BundleData`` (50 msg/s in + 50 out)."""
NEVER = float("inf")


# ---------------------------------------------------------------- namespaces created mid-run


class ArrivingClusterModel(ChurningClusterModel, ShapedClusterModel):
    """A :class:`ClusterModel` whose ``arrivals`` (namespace -> (minute, its bundles)) do not exist before their
    minute: no bundles, and their topics not live (:class:`~pulsar_rebalance.simulator.held_out_scenarios_2.ChurningClusterModel`'s
    ``lifetimes``). At its minute a namespace is created and its bundles placed as Pulsar's lookup places a new
    namespace's (:meth:`place_new`); its topics' rates may follow a profile (``shape``, as
    :class:`~pulsar_rebalance.simulator.held_out_scenarios.ShapedClusterModel`'s). Made by :func:`arriving`."""

    arrivals: dict[str, tuple[float, NamespaceBundles]]
    created: dict[str, dict[str, str]]
    """Per namespace created, where lookup placed each of its bundles (bundle -> broker)."""

    def _update_rates(self) -> None:
        super()._update_rates()
        arrivals = getattr(self, "arrivals", None)
        if not arrivals:
            return
        now = _minutes(self)
        for ns in sorted(n for n, (minute, _) in arrivals.items() if minute <= now):
            self.place_new(ns, arrivals.pop(ns)[1])

    def place_new(self, ns: str, bundles: NamespaceBundles) -> None:
        """Create namespace ``ns`` with ``bundles``, each placed by Pulsar's lookup: among the live brokers owning the
        fewest of the namespace's bundles (``removeMostServicingBrokersForNamespace``), the least long-term message
        rate (``LeastLongTermMessageRate``) of those not above the overload threshold (all of them when none is), the
        bundles placed before it in the batch weighing Pulsar's default ``BundleData``; ties: first in broker order."""
        stats = self.bundle_stats()  # the existing namespaces': the new one has no bundles yet
        usage = self.overload_usage(stats)
        limit = self.config.load_balancer_broker_overloaded_threshold_percentage / 100.0
        live = self.live_brokers()
        rate = {b: 0.0 for b in live}
        for bundle, s in stats.items():
            if self.owners[bundle] in rate:
                rate[self.owners[bundle]] += s["msgRateIn"] + s["msgRateOut"]
        count = dict.fromkeys(live, 0)
        placed: dict[str, str] = {}
        for r in bundles.ranges:
            fewest = min(count.values())
            candidates = [b for b in live if count[b] == fewest]
            fit = [b for b in candidates if usage[b] < limit] or [b for b in live if usage[b] < limit] or candidates
            dest = min(fit, key=lambda b: rate[b])
            placed[bundle_full_name(ns, r.name)] = dest
            count[dest] += 1
            rate[dest] += DEFAULT_BUNDLE_MSG_RATE
        self.namespaces[ns] = bundles
        self.owners.update(placed)
        self.created[ns] = placed


def arriving(
    model: ClusterModel,
    arrivals: Mapping[str, tuple[float, NamespaceBundles]],
    lifetimes: Mapping[str, tuple[float, float]],
    shape: Shape | None = None,
) -> ArrivingClusterModel:
    """``model`` (whose topics include the arriving namespaces') with those namespaces created at their minutes, its
    topics live as ``lifetimes`` says (an arriving namespace's must not live before it), from now on."""
    churned = churning(model, lifetimes)
    churned.__class__ = ArrivingClusterModel
    assert isinstance(churned, ArrivingClusterModel)
    if shape is not None:
        churned.shape = shape
    churned.created = {}
    churned.arrivals = dict(arrivals)
    churned._update_rates()
    return churned


def _add_namespace_topics(model: ClusterModel, topics: Sequence[Topic], share: float) -> None:
    """Add ``topics`` to ``model``, their rates scaled so that their load (under the model's load model, as the scenario
    helpers measure a bundle's) is ``share`` of the existing bundles' together. They are in no bundle's stats yet (the
    model's per-namespace index of topics is the one built with it, until :func:`churning` re-types it)."""
    model.topics.extend(topics)
    model._by_name.update({t.name: t for t in topics})
    model._update_rates()
    existing = sum(_bundle_loads(model).values())  # the namespace has no bundles: its topics are in none
    new = sum(_load(model, _topic_stats(t)) for t in topics)
    for t in topics:
        t.base_rate *= share * existing / new
    model._update_rates()


def _balanced(name: str, seed: int, model: ClusterModel, load: float, cycles: int, description: str) -> ScenarioRun:
    """The scenario ``name``: ``model`` calibrated to ``load`` (the topics not live now scaled alike, where some are
    not) and placed balanced."""
    if isinstance(model, ChurningClusterModel):
        _calibrate_across(model, load)
    else:
        _calibrate_to(model, load)
    _place_balanced(model, _ids(model))
    return ScenarioRun(name, seed, model, cycles, f"balanced at {load:.0%}; {description}")


# ---------------------------------------------------------------- a tenant onboarded

ONBOARD_NS = "newco/events"
ONBOARD_MIN = 15
ONBOARD_RAMP_MIN = 30
"""The new tenant's producers come over in this many minutes after its namespace is created (linearly)."""
ONBOARD_SHARE = 0.25
"""The new namespace's traffic once ramped up, as a fraction of the existing traffic."""
ONBOARD_TOPICS = 500
ONBOARD_CYCLES = 120
ONBOARD_LOAD = 0.4


def namespace_onboarding(seed: int) -> ScenarioRun:
    """A new tenant is onboarded (a migration from another cluster, a new product): its namespace is created with
    Pulsar's default 4 bundles, lookup places them when its first topics are looked up - one a broker, on the brokers
    with the least message rate, knowing nothing of the traffic coming - and then the traffic comes, and stays."""
    m, rng = _new_model(seed, n_brokers=10, n_namespaces=8, bundles_per_ns=16, n_topics=4000)
    topics = _topics(rng, ONBOARD_TOPICS, [ONBOARD_NS], 0.6)
    _add_namespace_topics(m, topics, ONBOARD_SHARE)
    bundles = NamespaceBundles.with_num_bundles(DEFAULT_BUNDLES)

    def ramp(ns: str, minutes: float) -> float:
        return min(max((minutes - ONBOARD_MIN) / ONBOARD_RAMP_MIN, 0.0), 1.0) if ns == ONBOARD_NS else 1.0

    model = arriving(m, {ONBOARD_NS: (ONBOARD_MIN, bundles)}, {t.name: (ONBOARD_MIN, NEVER) for t in topics}, ramp)
    return _balanced(
        "namespace-onboarding",
        seed,
        model,
        ONBOARD_LOAD,
        ONBOARD_CYCLES,
        f"{ONBOARD_NS} ({DEFAULT_BUNDLES} bundles, {ONBOARD_SHARE:.0%} more traffic) created at minute {ONBOARD_MIN}, "
        f"placed by lookup, ramping up over {ONBOARD_RAMP_MIN} min and staying",
    )


# ---------------------------------------------------------------- new subscriptions on existing topics

SUB_NS = "tenant-1/ns-5"
"""The namespace the new subscriptions attach to: created with Pulsar's default 4 bundles (the others have 16)."""
SUB_MIN = 20
NEW_SUBSCRIPTIONS = 2
SUB_CYCLES = 90
SUB_LOAD = 0.45


class SubscribedClusterModel(ClusterModel):
    """A :class:`ClusterModel` where, from ``from_minute`` on, every topic of namespace ``subscribed`` has ``added``
    more subscriptions: its fan-out (messages out per message in, and consumers) ``added`` higher, its publishing
    unchanged. Made by :func:`subscribed`."""

    subscribed: str
    from_minute: float
    added: float
    base_fanout: dict[str, float]

    def _update_rates(self) -> None:
        base = getattr(self, "base_fanout", None)
        if base is not None:
            extra = self.added if _minutes(self) >= self.from_minute else 0.0
            for t in self.topics:
                if t.namespace == self.subscribed:
                    t.fanout = base[t.name] + extra
        super()._update_rates()


def subscribed(model: ClusterModel, namespace: str, from_minute: float, added: float) -> SubscribedClusterModel:
    """``model`` with ``added`` subscriptions on every topic of ``namespace`` from ``from_minute`` on."""
    model.__class__ = SubscribedClusterModel
    assert isinstance(model, SubscribedClusterModel)
    model.subscribed, model.from_minute, model.added = namespace, from_minute, added
    model.base_fanout = {t.name: t.fanout for t in model.topics if t.namespace == namespace}
    model._update_rates()
    return model


def new_subscription(seed: int) -> ScenarioRun:
    """Two teams start consuming one namespace's topics (a change-data-capture sink, an analytics job): nothing is
    published faster, but every message is dispatched twice more, from the brokers that own the namespace's bundles -
    4 of them, as the namespace was created with Pulsar's default. The subscriptions stay."""
    bundles = {f"tenant-{i % 4}/ns-{i}": 16 for i in range(8)}
    bundles[SUB_NS] = DEFAULT_BUNDLES
    m, _ = _new_model(seed, n_brokers=10, n_namespaces=0, bundles_per_ns=0, n_topics=4000, namespace_bundles=bundles)
    return _balanced(
        "new-subscription",
        seed,
        subscribed(m, SUB_NS, SUB_MIN, NEW_SUBSCRIPTIONS),
        SUB_LOAD,
        SUB_CYCLES,
        f"from minute {SUB_MIN} {NEW_SUBSCRIPTIONS} new subscriptions on every topic of {SUB_NS} ({DEFAULT_BUNDLES} "
        f"bundles): its dispatch +{NEW_SUBSCRIPTIONS} per message in, publishing unchanged",
    )


# ---------------------------------------------------------------- an over-split namespace, its traffic gone

SPLIT_NS = "legacy/clickstream"
SPLIT_BUNDLES = 128
"""Pulsar's ``loadBalancerNamespaceMaximumBundles``: the namespace was split to the cap."""
SPLIT_OWNERS = ("broker-0:8080", "broker-1:8080")
"""Where its bundles stayed (the brokers that split them), dealt alternately."""
SPLIT_SHARE = 0.002
"""Its traffic left, as a fraction of the cluster's: a trickle."""
SPLIT_TOPICS = 4500
"""Topics over the 9 namespaces (500 each, the over-split one's too)."""
SPLIT_CYCLES = 60
SPLIT_LOAD = 0.55


def over_split_namespace(seed: int) -> ScenarioRun:
    """A namespace was hot once and auto-split up to the cap; its application has since moved elsewhere, leaving its
    topics and a trickle of traffic, and its 128 bundles (Pulsar cannot merge them) on the two brokers that split them.
    Everything else is balanced: the bundle counts are uneven, the load is not."""
    bundles = {f"tenant-{i % 4}/ns-{i}": 16 for i in range(8)}
    bundles[SPLIT_NS] = SPLIT_BUNDLES
    m, _ = _new_model(
        seed, n_brokers=10, n_namespaces=0, bundles_per_ns=0, n_topics=SPLIT_TOPICS, namespace_bundles=bundles
    )
    loads = _bundle_loads(m)
    legacy = sum(v for b, v in loads.items() if b.startswith(f"{SPLIT_NS}/"))
    rest = sum(loads.values()) - legacy
    factor = SPLIT_SHARE / (1 - SPLIT_SHARE) * rest / legacy
    for t in m.topics:
        if t.namespace == SPLIT_NS:
            t.base_rate *= factor
    m._update_rates()
    _calibrate_to(m, SPLIT_LOAD)
    _place_balanced(m, _ids(m))
    for i, bundle in enumerate(sorted(b for b in m.bundles() if b.startswith(f"{SPLIT_NS}/"))):
        m.owners[bundle] = SPLIT_OWNERS[i % len(SPLIT_OWNERS)]
    return ScenarioRun(
        "over-split-namespace",
        seed,
        m,
        SPLIT_CYCLES,
        f"balanced at {SPLIT_LOAD:.0%}; {SPLIT_NS}'s {SPLIT_BUNDLES} bundles ({SPLIT_SHARE:.1%} of the traffic) on "
        f"{' and '.join(b.split(':')[0] for b in SPLIT_OWNERS)}",
    )


# ---------------------------------------------------------------- a load test on a fresh namespace

PERF_NS = "perf/load-test"
PERF_TOPICS = 100
PERF_START_MIN = 30
PERF_END_MIN = 75
PERF_SHARE = 0.15
"""The test's traffic while it runs, as a fraction of the existing traffic."""
PERF_MSG_SIZE = 1024.0
"""``pulsar-perf produce``'s default message size (1 KB)."""
PERF_CYCLES = 120
PERF_LOAD = 0.45


def perf_topics(namespace: str, n: int, rng: random.Random) -> list[Topic]:
    """``pulsar-perf``'s topics: ``n`` of them, one rate, one message size, one producer and one subscription each."""
    names = [f"persistent://{namespace}/perf-{rng.getrandbits(32):08x}-{i}" for i in range(n)]
    return [
        Topic(name=x, namespace=namespace, hash=topic_hash(x), base_rate=1.0, msg_size=PERF_MSG_SIZE) for x in names
    ]


def perf_test_namespace(seed: int) -> ScenarioRun:
    """An operator load-tests the production cluster (a capacity check before a launch): ``pulsar-perf`` produces to
    and consumes from a fresh namespace's topics for 45 minutes, lookup having placed its 4 bundles one a broker on
    the brokers with the least message rate; then the test's topics are deleted. Nothing else changes."""
    m, rng = _new_model(seed, n_brokers=10, n_namespaces=8, bundles_per_ns=16, n_topics=4000)
    topics = perf_topics(PERF_NS, PERF_TOPICS, rng)
    _add_namespace_topics(m, topics, PERF_SHARE)
    bundles = NamespaceBundles.with_num_bundles(DEFAULT_BUNDLES)
    model = arriving(m, {PERF_NS: (PERF_START_MIN, bundles)}, {t.name: (PERF_START_MIN, PERF_END_MIN) for t in topics})
    return _balanced(
        "perf-test-namespace",
        seed,
        model,
        PERF_LOAD,
        PERF_CYCLES,
        f"pulsar-perf on {PERF_NS} ({DEFAULT_BUNDLES} bundles placed by lookup, {PERF_TOPICS} topics, "
        f"{PERF_SHARE:.0%} more traffic) from minute {PERF_START_MIN} to {PERF_END_MIN}, once",
    )


HELD_OUT_SCENARIOS_3: Mapping[str, Callable[[int], ScenarioRun]] = {
    "namespace-onboarding": namespace_onboarding,
    "new-subscription": new_subscription,
    "over-split-namespace": over_split_namespace,
    "perf-test-namespace": perf_test_namespace,
}

ALWAYS = ("not_worse", "no_hot", "moves")

EXPECTATIONS_3: Mapping[str, Expectation] = {
    "namespace-onboarding": Expectation(
        "a new tenant's namespace (default 4 bundles, a quarter more traffic) is created at minute 15; lookup puts its "
        "bundles one a broker on the 4 brokers with the least message rate; its traffic ramps up over 30 minutes and "
        "stays",
        ALWAYS,
        "lookup placed the new bundles knowing nothing of their traffic (nor of the brokers' sizes): 4 brokers carry "
        "the whole new tenant, for good; even it out (moving the new bundles or what else those brokers hold, or splitting the new bundles), "
        "without pushing a broker over 85 % and with moves in proportion",
    ),
    "new-subscription": Expectation(
        "two new subscriptions attach at minute 20 to every topic of a namespace created with the default 4 bundles: "
        "its dispatch and consumers grow, its publishing does not; they stay",
        ALWAYS,
        "the brokers owning that namespace's 4 bundles carry the added dispatch, for good: bring them back in line "
        "with the rest, which publish rates alone do not show, with moves in proportion",
    ),
    "over-split-namespace": Expectation(
        "balanced at 55 %; a namespace whose traffic has moved away (0.2 % left) still has 128 bundles, all on two "
        "brokers: bundle counts 6x uneven, load even",
        ("not_worse", "no_hot", "steady", "moves"),
        "the idle bundles weigh nothing: the brokers holding them are no hotter than the rest, and moving them changes "
        "no broker's usage, only disconnects their clients; nothing a move can fix, so the right number of moves is 0",
    ),
    "perf-test-namespace": Expectation(
        "an operator's pulsar-perf run on a fresh namespace (default 4 bundles placed by lookup, 100 topics, 15 % "
        "more traffic) from minute 30 to 75, its topics then deleted; once",
        ("not_worse", "no_hot", "jitter", "moves"),
        "the test ends within the hour and, but where lookup gives a test bundle to a half-size broker, leaves every "
        "broker below 85 %: moves made for it are wrong once its topics are deleted, so at most 2 moves a simulated "
        "day, ending no higher than doing nothing",
    ),
}
"""Each scenario's description and declared criteria, written with the scenarios, before any strategy ran on them."""


build = functools.partial(build_from, HELD_OUT_SCENARIOS_3)
"""``build(name, seed=0, *, load_model=None, noise=None, rate_noise=0.0, cadence="minute")``: the named scenario of the
third held-out set for ``seed`` (``KeyError`` lists the known names), as the first set's
:func:`~pulsar_rebalance.simulator.held_out_scenarios.build`; ``cadence`` is checked and passed on as in the first two
sets, and no scenario of this set depends on it."""


assert not set(HELD_OUT_SCENARIOS_3) & set(SCENARIOS), "a held-out scenario shares a name with a tuned-on one"
assert not set(HELD_OUT_SCENARIOS_3) & set(SET_1), "a scenario of the third set shares a name with the first's"
assert not set(HELD_OUT_SCENARIOS_3) & set(SET_2), "a scenario of the third set shares a name with the second's"
assert set(EXPECTATIONS_3) == set(HELD_OUT_SCENARIOS_3)

__all__ = [
    "CADENCES",
    "EXPECTATIONS_3",
    "HELD_OUT_SCENARIOS_3",
    "ArrivingClusterModel",
    "SubscribedClusterModel",
    "arriving",
    "build",
    "subscribed",
]
