"""Hostile admin answers (issue #11, items 3-4) through collect_load, over real HTTP.

The simulator answers with injected bodies (``SimulatedPulsar.inject_answer``): each class is either
rejected by the snapshot validation layer with an error naming broker / bundle / topic / field and
**nothing written** (every table's row count and the work directory checked), or - where Pulsar itself
can show it for a moment, or accepts it - accepted with a warning that reaches ``plans.summary.warnings``
and the affected bundle left out of the plan.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from pulsar_rebalance.errors import RebalanceError
from pulsar_rebalance.pipeline.context import JobContext
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.simulator.generator import generate_cluster
from pulsar_rebalance.simulator.server import SimulatedPulsar
from pulsar_rebalance.store.engine import make_engine, session_scope

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

LOAD_REPORT = "/admin/v2/broker-stats/load-report"
TOPIC_STATS = "/admin/v2/broker-stats/topics"


@pytest.fixture
def sim():
    with SimulatedPulsar(generate_cluster(seed=42), ephemeral=True) as s:
        yield s


def table_counts(url: str) -> dict[str, int]:
    """Row count of every table of the state store."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as c:
            tables = sa.inspect(c).get_table_names()
            return {
                t: c.execute(sa.text(f'SELECT count(*) FROM "{t}"')).scalar_one()
                for t in tables
                if t != "alembic_version"
            }
    finally:
        engine.dispose()


def _first_topic(body: dict[str, Any]) -> tuple[str, str, str, dict[str, Any]]:
    for ns, bundles in body.items():
        for rng, domains in bundles.items():
            for topics in domains.values():
                for topic, stats in topics.items():
                    return ns, rng, topic, stats
    raise AssertionError("no topic in the simulator's stats")


def topic_field(key: str, value: Any) -> Callable[[dict], dict]:
    def answer(body: dict) -> dict:
        _, _, _, stats = _first_topic(body)
        stats[key] = value
        return body

    return answer


def report_field(*path: str, value: Any) -> Callable[[dict], dict]:
    def answer(body: dict) -> dict:
        target = body
        for key in path[:-1]:
            target = target[key] if key != "*" else next(iter(target.values()))
        target[path[-1]] = value
        return body

    return answer


def _namespace_with_bundles(sim: SimulatedPulsar) -> str:
    return max(sim.state.namespaces(), key=lambda ns: len(sim.state.bundle_ranges(ns)))


def _bundles_path(ns: str) -> str:
    return f"/admin/v2/namespaces/{ns}/bundles"


def _owned_path(sim: SimulatedPulsar, broker: str) -> str:
    return f"/admin/v2/brokers/{sim.state.cluster}/{broker}/ownedNamespaces"


def _stats_bundle(sim: SimulatedPulsar, broker: str) -> str:
    return next(iter(sim.state.load_report(broker)["lastStats"]))


# Each case: (id, inject(sim) -> substrings the error must contain)
def case_producer_count_2_63(sim):
    sim.inject_answer(TOPIC_STATS, topic_field("producerCount", 2**63), broker=1)
    _, rng, topic, _ = _first_topic(sim.state.topic_stats(sim.broker_ids[1]))
    return [sim.broker_ids[1], topic, rng, "producerCount", "less than or equal to 2147483647"]


def case_producer_count_1e30(sim):
    sim.inject_answer(TOPIC_STATS, topic_field("producerCount", 1e30), broker=0)
    _, rng, topic, _ = _first_topic(sim.state.topic_stats(sim.broker_ids[0]))
    return [sim.broker_ids[0], topic, rng, "producerCount"]


def case_topic_rate_infinity(sim):
    sim.inject_answer(TOPIC_STATS, topic_field("msgRateIn", float("inf")), broker=2)
    _, rng, topic, _ = _first_topic(sim.state.topic_stats(sim.broker_ids[2]))
    return [sim.broker_ids[2], topic, "msgRateIn", "finite"]


def case_topic_rate_nan(sim):
    sim.inject_answer(TOPIC_STATS, topic_field("msgThroughputOut", float("nan")), broker=2)
    _, _, topic, _ = _first_topic(sim.state.topic_stats(sim.broker_ids[2]))
    return [sim.broker_ids[2], topic, "msgThroughputOut"]


def case_topic_rate_negative(sim):
    sim.inject_answer(TOPIC_STATS, topic_field("msgRateOut", -1.0), broker=3)
    _, _, topic, _ = _first_topic(sim.state.topic_stats(sim.broker_ids[3]))
    return [sim.broker_ids[3], topic, "msgRateOut"]


def case_subscription_consumer_count_long(sim):
    def answer(body):
        _, _, _, stats = _first_topic(body)
        stats["subscriptions"] = {"s": {"consumerCount": 2**40}}
        return body

    sim.inject_answer(TOPIC_STATS, answer, broker=1)
    return [sim.broker_ids[1], "subscriptions.s.consumerCount"]


def _move_stats(sim, *, drop_from_owner: bool) -> tuple[str, str, str]:
    """Broker 0's load report also lists a bundle of broker 1 (whose report keeps or drops it)."""
    a, b = sim.broker_ids[0], sim.broker_ids[1]
    theirs = _stats_bundle(sim, b)
    stats = sim.state.load_report(b)["lastStats"][theirs]

    def edit(add: bool):
        def answer(body):
            if add:
                body["lastStats"][theirs] = copy.deepcopy(stats)
            else:
                body["lastStats"].pop(theirs)
            body.pop("bundles", None)
            return body

        return answer

    sim.inject_answer(LOAD_REPORT, edit(True), broker=a)
    if drop_from_owner:
        sim.inject_answer(LOAD_REPORT, edit(False), broker=b)
    return a, b, theirs


def case_report_lists_another_brokers_bundle(sim):
    a, b, theirs = _move_stats(sim, drop_from_owner=False)
    return [a, b, theirs, "lastStats", "load reports of both"]


def case_report_lists_bundle_owned_elsewhere(sim):
    a, b, theirs = _move_stats(sim, drop_from_owner=True)
    return [a, b, theirs, "owned by"]


def case_bundle_stats_producer_count_2_63(sim):
    b = sim.broker_ids[4]
    bundle = _stats_bundle(sim, b)
    sim.inject_answer(LOAD_REPORT, report_field("lastStats", bundle, "producerCount", value=2**63), broker=b)
    return [b, bundle, "producerCount", "Java int"]


def case_report_num_topics_1e30(sim):
    b = sim.broker_ids[2]
    sim.inject_answer(LOAD_REPORT, report_field("numTopics", value=1e30), broker=b)
    return [b, "numTopics", "Java int"]


def case_report_cpu_overflows_float(sim):
    b = sim.broker_ids[3]
    sim.inject_answer(LOAD_REPORT, report_field("cpu", "usage", value=1e39), broker=b)
    return [b, "cpu", "finite float percentage"]


def case_report_limit_denormal(sim):
    b = sim.broker_ids[3]
    sim.inject_answer(LOAD_REPORT, report_field("bandwidthIn", "limit", value=5e-324), broker=b)
    return [b, "bandwidthIn"]


def case_report_rate_infinity(sim):
    b = sim.broker_ids[1]
    sim.inject_answer(LOAD_REPORT, report_field("msgRateIn", value=float("inf")), broker=b)
    return [b, "msgRateIn"]


def case_boundaries_not_from_zero(sim):
    ns = _namespace_with_bundles(sim)
    sim.inject_answer(
        _bundles_path(ns),
        lambda body: {**body, "boundaries": body["boundaries"][1:], "numBundles": body["numBundles"] - 1},
    )
    return [ns, "0x00000000", "boundaries[0]"]


def case_boundaries_not_to_end(sim):
    ns = _namespace_with_bundles(sim)
    sim.inject_answer(
        _bundles_path(ns),
        lambda body: {**body, "boundaries": body["boundaries"][:-1], "numBundles": body["numBundles"] - 1},
    )
    return [ns, "0xffffffff"]


def case_boundaries_overlap(sim):
    ns = _namespace_with_bundles(sim)

    def answer(body):
        b = body["boundaries"]
        b[1], b[2] = b[2], b[1]
        return body

    sim.inject_answer(_bundles_path(ns), answer)
    return [ns, "overlap", "boundaries[2]"]


def case_owned_name_not_a_bundle(sim):
    b = sim.broker_ids[2]
    ns = _namespace_with_bundles(sim)
    sim.inject_answer(
        _owned_path(sim, b), lambda body: {**body, f"{ns}/0x00000000_zz": {"broker_assignment": "shared"}}, broker=b
    )
    return [b, f"{ns}/0x00000000_zz", "ownedNamespaces"]


def case_broker_listed_twice(sim):
    sim.inject_answer(f"/admin/v2/brokers/{sim.state.cluster}", lambda body: [*body, body[0]])
    return [sim.broker_ids[0], "listed twice"]


def case_topic_stats_nested_deeper_than_python_parses(sim):
    sim.inject_answer(TOPIC_STATS, b"[" * 100_000 + b"]" * 100_000, broker=1)
    return [sim.broker_ids[1], "broker-stats/topics", "not JSON"]


def case_load_report_with_a_5000_digit_number(sim):
    sim.inject_answer(LOAD_REPORT, b'{"cpu": {"usage": ' + b"9" * 5000 + b', "limit": 100}}', broker=2)
    return [sim.broker_ids[2], "load-report", "not JSON"]


def case_load_report_string_with_nul(sim):
    # found by the Hypothesis suite: PostgreSQL's JSONB cannot hold U+0000 (it failed in the INSERT)
    b = sim.broker_ids[0]
    sim.inject_answer(LOAD_REPORT, report_field("brokerVersionString", value="4.0.0\x00"), broker=b)
    return [b, "brokerVersionString", "U+0000"]


def case_topic_name_with_lone_surrogate(sim):
    def answer(body):
        ns, rng, topic, stats = _first_topic(body)
        domains = body[ns][rng]
        domain = next(d for d, topics in domains.items() if topic in topics)
        domains[domain][topic + "\ud800"] = domains[domain].pop(topic)
        return body

    sim.inject_answer(TOPIC_STATS, answer, broker=3)
    return [sim.broker_ids[3], "topic", "UTF-8"]


def case_load_report_stats_of_a_non_bundle(sim):
    b = sim.broker_ids[1]
    stats = next(iter(sim.state.load_report(b)["lastStats"].values()))
    sim.inject_answer(LOAD_REPORT, report_field("lastStats", "not-a-bundle", value=stats), broker=b)
    return [b, "not-a-bundle", "lastStats", "not a bundle name"]


REJECTED = [v for k, v in sorted(globals().items()) if k.startswith("case_")]


@pytest.mark.parametrize("case", REJECTED, ids=[c.__name__[5:] for c in REJECTED])
def test_hostile_answer_rejected_with_nothing_written(spark, sim, db_url, tmp_path, case):
    from pulsar_rebalance.pipeline import stages

    must_name = case(sim)
    before = table_counts(db_url)
    client = PulsarAdminClient.from_url(sim.admin_url, retries=0)
    work = tmp_path / "work"
    with pytest.raises(RebalanceError) as exc:
        stages.stage_collect(
            spark, JobContext("r1", str(work)), params_doc={}, engine=make_engine(db_url), client=client
        )
    message = str(exc.value)
    for part in must_name:
        assert str(part) in message, (part, message)
    assert table_counts(db_url) == before
    assert not work.exists(), "no Parquet may be written"


def _inject_transitional(sim) -> dict[str, Any]:
    """Every class Pulsar itself can show (or accepts), at once; returns what the plan must say."""
    ids = sim.broker_ids
    owners = sim.state.owners()
    # 1. a bundle in two brokers' ownedNamespaces (unload in flight between the two reads)
    twice = next(b for b, o in owners.items() if o == ids[0])
    sim.inject_answer(
        _owned_path(sim, ids[1]), lambda body: {**body, twice: {"broker_assignment": "shared"}}, broker=ids[1]
    )
    # 2. a bundle owned under a range the boundaries (read earlier) do not have: split meanwhile
    ns = _namespace_with_bundles(sim)
    lo, hi = (int(x, 16) for x in sim.state.bundle_ranges(ns)[0].split("_"))
    child = f"{ns}/0x{lo:08x}_0x{(lo + hi) // 2:08x}"
    sim.inject_answer(
        _owned_path(sim, ids[2]), lambda body: {**body, child: {"broker_assignment": "shared"}}, broker=ids[2]
    )

    # 3. a broker reporting every limit as 0: reads 0 % (Pulsar's formula)
    def zero_limits(body):
        for key in ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut"):
            body[key]["limit"] = 0.0
        return body

    sim.inject_answer(LOAD_REPORT, zero_limits, broker=ids[3])
    # 4. a bundle in a load report but in nobody's ownedNamespaces (unloaded between the two reads)
    stale = next(iter(sim.state.load_report(ids[2])["lastStats"]))
    sim.inject_answer(
        _owned_path(sim, ids[2]), lambda body: {k: v for k, v in body.items() if k != stale}, broker=ids[2]
    )
    # 5. a broker that owns bundles but is missing from the broker list (its load is invisible)
    hidden = ids[4]
    assert hidden != sim.state.leader
    hidden_bundles = sorted(b for b, o in owners.items() if o == hidden)
    sim.inject_answer(f"/admin/v2/brokers/{sim.state.cluster}", lambda body: [b for b in body if b != hidden])
    return {
        "twice": twice,
        "child": child,
        "zero": ids[3],
        "stale": stale,
        "hidden": hidden,
        "hidden_bundles": hidden_bundles,
    }


@pytest.mark.slow
def test_transitional_answers_are_planned_with_warnings_and_the_bundles_left_out(spark, sim, db_url, tmp_path):
    from pulsar_rebalance.pipeline import stages
    from pulsar_rebalance.store import repository as repo

    expect = _inject_transitional(sim)
    engine = make_engine(db_url)
    client = PulsarAdminClient.from_url(sim.admin_url, retries=0)
    ctx = JobContext("hostile-ok", str(tmp_path / "work"))
    collected = stages.stage_collect(spark, ctx, params_doc={}, engine=engine, client=client)
    assert collected["brokers"] == 4 and collected["warnings"] >= 5, collected
    stages.stage_compute_usage(spark, ctx, engine=engine)
    stages.stage_detect(spark, ctx, engine=engine)
    planned = stages.stage_plan(spark, ctx, engine=engine)
    with session_scope(engine) as s:
        plan = repo.get_plan(s, plan_id=planned["plan_id"])
        owned = repo.current_ownership(s, cluster_id=plan.cluster_id)
    warnings = plan.summary["warnings"]
    by_kind: dict[str, list[dict]] = {}
    for w in warnings:
        by_kind.setdefault(w["kind"], []).append(w)
    assert set(by_kind) == {
        "bundle_claimed_twice",
        "bundle_not_in_boundaries",
        "limit_zero",
        "bundle_stats_without_owner",
        "bundles_without_owner",
    }, warnings
    (twice,) = by_kind["bundle_claimed_twice"]
    assert twice["bundle"] == expect["twice"]
    assert sim.broker_ids[0] in twice["message"] and sim.broker_ids[1] in twice["message"]
    assert [w["bundle"] for w in by_kind["bundle_not_in_boundaries"]] == [expect["child"]]
    (zero,) = by_kind["limit_zero"]
    assert zero["broker"] == expect["zero"] and "0 %" in zero["message"]
    assert [w["bundle"] for w in by_kind["bundle_stats_without_owner"]] == [expect["stale"]]
    unowned_text = " ".join(w["message"] for w in by_kind["bundles_without_owner"])
    for bundle in [*expect["hidden_bundles"], expect["stale"]]:
        assert bundle.rpartition("/")[2] in unowned_text
    left_out = {expect["twice"], expect["child"], expect["stale"], *expect["hidden_bundles"]}
    assert not left_out & set(owned), "bundles seen mid-transition get no recorded owner"
    assert not left_out & {f"{a.namespace}/{a.bundle_range}" for a in plan.actions}
    assert expect["hidden"] not in {a.destination_broker for a in plan.actions}
    assert planned["actions"] > 0, "the rest of the cluster is still planned"
