"""The five stages run directly (no Airflow): real Spark session, real Postgres, real HTTP simulator.

Also the bad-input contract of issue #2: unreachable admin URL, a broker answering 500, a malformed
load report -> a clear error and nothing written.
"""

from __future__ import annotations

import json

import httpx
import pytest
import sqlalchemy as sa

from pulsar_rebalance.errors import AdminConnectError, MalformedResponseError, ServerSideError
from pulsar_rebalance.pipeline.context import JobContext
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.simulator.generator import generate_cluster
from pulsar_rebalance.simulator.server import SimulatedPulsar
from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import make_engine, session_scope

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


@pytest.fixture
def sim():
    with SimulatedPulsar(generate_cluster(seed=42), ephemeral=True) as s:
        yield s


class _NoSpark:
    """Stands for a SparkSession that must not be used."""

    def __getattr__(self, name):
        raise AssertionError(f"Spark used: {name}")


def _count(url: str, table: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as c:
            return c.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()
    finally:
        engine.dispose()


def _approve(db_url: str, plan_id: str) -> None:
    """Approve as bob, through the CLI's decision path (it reads the state DB from the environment)."""
    import os

    from pulsar_rebalance.cli.plans import decide

    os.environ["PULSAR_REBALANCE_DATABASE_URL"] = db_url
    try:
        decide(plan_id, "approved", by="bob", comment="ok")
    finally:
        del os.environ["PULSAR_REBALANCE_DATABASE_URL"]


def test_stages_plan_then_execute_an_approved_plan(spark, sim, db_url, tmp_path, capsys, monkeypatch):
    from pulsar_rebalance.pipeline import stages

    engine = make_engine(db_url)
    client = PulsarAdminClient.from_url(sim.admin_url)
    ctx = JobContext("manual__2026-11-22T01:00:00+00:00", str(tmp_path / "work"))
    collected = stages.stage_collect(
        spark, ctx, params_doc={"shedding_strategy": "ThresholdShedder"}, engine=engine, client=client
    )
    assert collected["brokers"] == 5 and collected["topics"] > 0
    usage = stages.stage_compute_usage(spark, ctx, engine=engine)
    assert usage["topicBundleMismatches"] == 0
    detected = stages.stage_detect(_NoSpark(), ctx, engine=engine)  # a local work dir: detect needs no Spark
    assert detected["label"] == "Success" and detected["unloads"] > 0, detected
    assert stages.read_json(spark, ctx.path(stages.DECISION_JSON)) == stages.read_json(
        _NoSpark(), ctx.path(stages.DECISION_JSON)
    )
    planned = stages.stage_plan(spark, ctx, engine=engine)
    assert planned["status"] == "pending" and planned["actions"] > 0
    assert stages.stage_plan(spark, ctx, engine=engine)["plan_id"] == planned["plan_id"]  # retry: same plan

    _approve(db_url, planned["plan_id"])
    report = stages.stage_execute(_NoSpark(), ctx, engine=engine, client=client)  # a local work dir: no Spark
    assert report["status"] == "executed", report
    # the small Parquet outputs written without Spark are read by Spark like its own
    from pulsar_rebalance.pipeline import context as C

    actions = spark.read.parquet(ctx.path(C.ACTIONS))
    assert actions.schema.simpleString() == (
        "struct<plan_id:string,seq:int,kind:string,namespace:string,bundle:string,"
        "source:string,destination:string,boundaries:string,reason:string>"
    )
    assert actions.count() == planned["actions"]
    states = {(r.seq, r.state, r.attempts) for r in spark.read.parquet(ctx.path(C.EXECUTION)).collect()}
    assert states == {(seq, "completed", 1) for seq in range(planned["actions"])}, states
    assert report["unloads_executed"] == planned["summary"]["numBundleUnloads"]
    assert report["max_usage_after"] < report["max_usage_before"]
    # a retry of execute_unload after it finished does nothing again and returns the recorded outcome
    owners = sim.state.owners()
    assert stages.stage_execute(spark, ctx, engine=engine, client=client) == report
    assert sim.state.owners() == owners
    with session_scope(engine) as s:
        plan = repo.get_plan(s, plan_id=planned["plan_id"])
    assert all(a.attempts == 1 and a.state == "completed" for a in plan.actions)

    # "where was bundle X at time T and why did it move", from the CLI
    from pulsar_rebalance.cli import main

    moved = next(a for a in plan.actions if a.kind == "unload")
    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)
    capsys.readouterr()
    assert main(["history", moved.bundle, "--json"]) == 0
    history = json.loads(capsys.readouterr().out)
    assert history[-1]["broker_id"] == moved.destination_broker and history[-1]["approved_by"] == "bob"
    assert history[-1]["action_reason"] == moved.reason and history[-1]["valid_to"] is None
    assert main(["history", moved.bundle, "--at", "2000-01-01T00:00:00"]) == 0
    assert "no ownership recorded" in capsys.readouterr().out


def test_the_default_planner_runs_through_the_stages_and_its_plan_executes(spark, sim, db_url, tmp_path):
    """GlobalPlanner (the default): detect reads the busiest bundles' topics from topics.parquet, the
    plan keeps the planner's destinations and predictions, and executing it lowers the busiest broker."""
    from pulsar_rebalance.pipeline import stages

    engine = make_engine(db_url)
    client = PulsarAdminClient.from_url(sim.admin_url)
    ctx = JobContext("manual__2026-11-22T02:00:00+00:00", str(tmp_path / "work"))
    stages.stage_collect(spark, ctx, params_doc={}, engine=engine, client=client)
    stages.stage_compute_usage(spark, ctx, engine=engine)
    detected = stages.stage_detect(spark, ctx, engine=engine)
    assert detected["label"] == "Success" and detected["unloads"] > 0, detected
    scenario = stages.read_json(spark, ctx.path(stages.SCENARIO_JSON))  # the busiest bundles' topics went along
    assert scenario["shedding"] == "GlobalPlanner" and scenario["cycles"][0]["bundleTopics"]
    planned = stages.stage_plan(spark, ctx, engine=engine)
    assert planned["summary"]["maxUsageAfterPredicted"] < planned["summary"]["maxUsageBefore"]
    # the planner's plan passed the do-no-harm guard (checked against the reports, cut mode) and keeps moves
    assert planned["guard"]["mode"] == "cut" and planned["guard"]["kept"] > 0, planned["guard"]
    with session_scope(engine) as s:
        plan = repo.get_plan(s, plan_id=planned["plan_id"])
        assert plan.summary["guard"]["kept"] == len(plan.actions)
        assert plan.summary["strategies"]["shedding"] == plan.summary["strategies"]["placement"] == "GlobalPlanner"
        unloads = [a for a in plan.actions if a.kind == "unload"]
        assert unloads and all(
            a.reason.startswith("Overloaded: GlobalPlanner") and a.destination_broker for a in unloads
        )

    _approve(db_url, planned["plan_id"])
    report = stages.stage_execute(spark, ctx, engine=engine, client=client)
    assert report["status"] == "executed", report
    assert report["max_usage_after"] < report["max_usage_before"]


def test_the_planner_reads_no_topics_and_starts_no_spark_when_no_bundle_is_a_split_candidate(
    spark, sim, db_url, tmp_path, monkeypatch
):
    """No bundle carries a large share of its broker (a big cluster of small bundles): detect_overload decides
    without the topic scan, so it starts no Spark session (the plan is the same: no candidate, no topics)."""
    from pulsar_rebalance.pipeline import stages

    engine = make_engine(db_url)
    client = PulsarAdminClient.from_url(sim.admin_url)
    ctx = JobContext("manual__2026-11-22T02:30:00+00:00", str(tmp_path / "work"))
    stages.stage_collect(spark, ctx, params_doc={}, engine=engine, client=client)
    stages.stage_compute_usage(spark, ctx, engine=engine)
    monkeypatch.setattr(stages, "split_candidates", lambda reports: [])
    detected = stages.stage_detect(_NoSpark(), ctx, engine=engine)
    assert detected["label"] == "Success" and detected["unloads"] > 0, detected
    scenario = stages.read_json(spark, ctx.path(stages.SCENARIO_JSON))
    assert scenario["shedding"] == "GlobalPlanner" and not scenario["cycles"][0].get("bundleTopics")


def test_unreachable_admin_url_fails_clearly_and_writes_nothing(spark, db_url, tmp_path):
    from pulsar_rebalance.pipeline import stages

    client = PulsarAdminClient.from_url("http://127.0.0.1:9", timeout=2, retries=0)
    with pytest.raises(AdminConnectError) as exc:
        stages.stage_collect(
            spark,
            JobContext("r1", str(tmp_path)),
            params_doc={"shedding_strategy": "ThresholdShedder"},
            engine=make_engine(db_url),
            client=client,
        )
    assert "127.0.0.1:9" in str(exc.value)
    assert _count(db_url, "runs") == 0 and _count(db_url, "broker_load") == 0


def test_broker_answering_500_fails_clearly_and_writes_nothing(spark, sim, db_url, tmp_path):
    from pulsar_rebalance.pipeline import stages

    sim.inject_error(sim.broker_ids[2], status=500)
    client = PulsarAdminClient.from_url(sim.admin_url, retries=0)
    with pytest.raises(ServerSideError) as exc:
        stages.stage_collect(
            spark,
            JobContext("r1", str(tmp_path)),
            params_doc={"shedding_strategy": "ThresholdShedder"},
            engine=make_engine(db_url),
            client=client,
        )
    assert exc.value.status_code == 500
    assert _count(db_url, "runs") == 0 and _count(db_url, "bundle_ranges") == 0


def test_malformed_load_report_fails_clearly_and_writes_nothing(spark, sim, db_url, tmp_path):
    from pulsar_rebalance.pipeline import stages

    sim.inject_malformed_load_report(sim.broker_ids[1])
    client = PulsarAdminClient.from_url(sim.admin_url, retries=0)
    with pytest.raises(MalformedResponseError) as exc:
        stages.stage_collect(
            spark,
            JobContext("r1", str(tmp_path)),
            params_doc={"shedding_strategy": "ThresholdShedder"},
            engine=make_engine(db_url),
            client=client,
        )
    assert "load-report" in str(exc.value)
    assert _count(db_url, "runs") == 0 and _count(db_url, "ownership") == 0


def test_collect_at_scale_fetches_topics_in_spark_and_records_brokers_that_do_not_answer(spark, db_url, tmp_path):
    """120 simulated brokers over real HTTP: topic stats fetched per broker in Spark tasks straight to Parquet;
    a broker that does not answer is left out with a warning that reaches the plan (not fatal); too many fail
    the run with nothing written."""
    from pulsar_rebalance.pipeline import context as C
    from pulsar_rebalance.pipeline import stages

    state = generate_cluster(
        seed=7,
        brokers=120,
        namespaces=[f"t/ns-{i}" for i in range(12)],
        topics_per_namespace=40,
        bundles_per_namespace=16,
        hot_namespace="t/ns-11",
        port_base=0,
    )
    with SimulatedPulsar(state, ephemeral=True) as big:
        down = big.broker_ids[3]
        big.inject_error(down, status=503)
        client = PulsarAdminClient.from_url(big.admin_url, retries=1, backoff_s=0.01)
        ctx = JobContext("scale-collect", str(tmp_path / "work"))
        engine = make_engine(db_url)
        out = stages.stage_collect(spark, ctx, params_doc={"max_missing_brokers": 0.05}, engine=engine, client=client)
        q = out["dataQuality"]
        assert q["brokers"] == 120 and list(q["unansweredBrokers"]) == [down], q
        assert "503" in q["unansweredBrokers"][down] and q["brokersWithoutTopicStats"] == {}, q
        topics = spark.read.parquet(ctx.path(C.TOPICS))
        expected = sum(len(big.state.topics_in_bundle(b)) for b, o in big.state.owners().items() if o != down)
        assert topics.count() == out["topics"] == expected > 0
        assert topics.where(topics.broker == down).count() == 0
        with_topics = {o for b, o in big.state.owners().items() if o != down and big.state.topics_in_bundle(b)}
        assert {r.broker for r in topics.select("broker").distinct().collect()} == with_topics
        assert _count(db_url, "broker_load") == 119
        with session_scope(engine) as s:  # what the plan's warnings (and its page) will show
            warnings = repo.snapshot_check(s, run_id=ctx.run_id)["warnings"]
        (unanswered,) = [w for w in warnings if w["kind"] == "broker_unanswered"]
        assert unanswered["broker"] == down and "503" in unanswered["message"]

        # more missing than max_missing_brokers allows: the run fails before writing anything
        for b in big.broker_ids[10:20]:
            big.inject_error(b, status=503)
        ctx2 = JobContext("scale-collect-2", str(tmp_path / "work"))
        with pytest.raises(ServerSideError, match="max_missing_brokers=0.05"):
            stages.stage_collect(spark, ctx2, params_doc={"max_missing_brokers": 0.05}, engine=engine, client=client)
        assert _count(db_url, "runs") == 1


def test_broker_whose_topic_stats_do_not_answer_is_data_quality_and_too_many_fail_with_nothing_written(
    spark, sim, db_url, tmp_path
):
    """The Spark tasks' side: a broker whose load report answered but whose topic stats do not (5xx after the
    client's retries) is recorded with a warning for the plan; above max_missing_brokers the run fails and the
    Parquet the tasks wrote is removed."""
    from pulsar_rebalance.pipeline import context as C
    from pulsar_rebalance.pipeline import stages

    engine = make_engine(db_url)
    client = PulsarAdminClient.from_url(sim.admin_url, retries=0)
    silent = sim.broker_ids[1]
    sim.inject_request_error(503, method="GET", path_contains="/broker-stats/topics", broker=silent)
    work = tmp_path / "work"
    with pytest.raises(ServerSideError, match="max_missing_brokers=0") as exc:
        stages.stage_collect(
            spark, JobContext("r1", str(work)), params_doc={"max_missing_brokers": 0}, engine=engine, client=client
        )
    assert silent in str(exc.value)
    assert _count(db_url, "runs") == 0 and not work.exists()

    ctx = JobContext("r2", str(work))
    out = stages.stage_collect(spark, ctx, params_doc={"max_missing_brokers": 0.25}, engine=engine, client=client)
    assert (
        list(out["dataQuality"]["brokersWithoutTopicStats"]) == [silent]
        and out["dataQuality"]["unansweredBrokers"] == {}
    )
    assert _count(db_url, "broker_load") == 5  # its load report is kept
    topics = spark.read.parquet(ctx.path(C.TOPICS))
    assert topics.count() == out["topics"] > 0 and topics.where(topics.broker == silent).count() == 0
    with session_scope(engine) as s:
        warnings = repo.snapshot_check(s, run_id=ctx.run_id)["warnings"]
    assert [w["broker"] for w in warnings if w["kind"] == "broker_without_topic_stats"] == [silent]


def test_topic_stats_fetcher_skips_and_reports_a_broker_whose_topic_stats_fail(sim):
    """What each Spark task runs, called directly: its own client (built from the driver's client spec, the
    credential out of repr), rows per broker, an unanswering broker reported and skipped."""
    from pulsar_rebalance.errors import ServerSideError as Err
    from pulsar_rebalance.pipeline.collect import TOPIC_COLUMNS, TopicStatsFetcher, rebuild_exception

    class Outcome:  # the accumulator's interface
        def __init__(self):
            self.value = {}

        def add(self, d):
            self.value.update(d)

    client = PulsarAdminClient.from_url(sim.admin_url, token="s3cret-token", retries=0)
    fetch = TopicStatsFetcher.for_client(client, sim.state.namespaces())
    assert fetch.client.url == sim.admin_url and fetch.client.authorization == "Bearer s3cret-token"
    assert "s3cret" not in repr(fetch)
    sim.inject_error(sim.broker_ids[1], status=500)
    outcome = Outcome()
    rows = list(fetch(sim.broker_ids[:3], outcome))
    kind, *exc = outcome.value[sim.broker_ids[1]]
    assert kind == "missing" and isinstance(rebuild_exception(*exc), Err) and "500" in str(rebuild_exception(*exc))
    assert {outcome.value[b][0] for b in (sim.broker_ids[0], sim.broker_ids[2])} == {"ok"}
    assert {r[0] for r in rows} <= {sim.broker_ids[0], sim.broker_ids[2]} and all(
        len(r) == len(TOPIC_COLUMNS) for r in rows
    )
    assert len(rows) == sum(
        len(sim.state.topics_in_bundle(b))
        for b, o in sim.state.owners().items()
        if o in (sim.broker_ids[0], sim.broker_ids[2])
    )


_ISOLATION_PATH = "/admin/v2/clusters/sim-cluster/namespaceIsolationPolicies"


def _isolation_policy(namespaces, primary, min_limit="1"):
    return {
        "namespaces": namespaces,
        "primary": primary,
        "secondary": [],
        "auto_failover_policy": {
            "policy_type": "min_available",
            "parameters": {"min_limit": min_limit, "usage_threshold": "80"},
        },
    }


@pytest.mark.parametrize(
    ("served", "message"),
    [
        (
            {"bad-regex": _isolation_policy(["tenant-b/.*"], ["broker-("])},
            "namespace isolation policy 'bad-regex' of cluster sim-cluster is invalid: "
            "namespaceIsolationPolicies.bad-regex.primary[0]: invalid policy regex 'broker-('",
        ),
        (
            {"no-namespace": _isolation_policy([], ["broker-1"])},
            "namespace isolation policy 'no-namespace' of cluster sim-cluster is invalid: "
            "namespaceIsolationPolicies.no-namespace.namespaces: at least one namespace regex is required",
        ),
        (
            None,  # stored through the admin API, which accepts it as Pulsar does
            "namespace isolation policy 'negative' of cluster sim-cluster is invalid: "
            "namespaceIsolationPolicies.negative.auto_failover_policy.parameters.min_limit: -1 is negative",
        ),
    ],
)
def test_malformed_placement_policy_fails_collect_naming_it_and_writes_nothing(sim, db_url, tmp_path, served, message):
    from pulsar_rebalance.pipeline import stages

    if served is None:
        sim.state.set_namespace_isolation_policy("negative", _isolation_policy(["tenant-b/.*"], [".*"], "-1"))
    else:  # what a broken or foreign admin service might answer, in place of a valid policy's 200
        sim.state.set_namespace_isolation_policy("valid", _isolation_policy(["none/.*"], ["x"]), unload=False)
        sim.inject_answer(_ISOLATION_PATH, served)
    client = PulsarAdminClient.from_url(sim.admin_url, retries=0)
    with pytest.raises(MalformedResponseError) as exc:
        stages.stage_collect(  # fails before any Spark work
            _NoSpark(), JobContext("r1", str(tmp_path)), params_doc={}, engine=make_engine(db_url), client=client
        )
    assert message in str(exc.value) and exc.value.url.endswith(_ISOLATION_PATH)
    for table in ("runs", "broker_load", "placement_policies", "ownership"):
        assert _count(db_url, table) == 0, table


def test_placement_policies_are_stored_with_the_run_and_reach_decide_and_the_plan(spark, sim, db_url, tmp_path):
    """The hot namespace isolated on its overloaded broker (set without unloading, as
    ``unloadBundles=false``), a failure domain and an anti-affinity group: collect stores them with the run,
    detect's scenario carries them, the load manager's level drops the shedder's picks of the hot namespace
    (NamespacePolicies), and the plan moves none of its bundles and places nothing on its broker."""
    from pulsar_rebalance.pipeline import stages

    hot_broker = sim.broker_ids[0]
    policy = _isolation_policy(["tenant-b/events"], [hot_broker.replace(".", r"\.")])
    with httpx.Client(base_url=sim.admin_url, timeout=5) as http:
        set_policy = http.post(f"{_ISOLATION_PATH}/hot", params={"unloadBundles": "false"}, json=policy)
        assert set_policy.status_code == 204
        domain = {"brokers": sim.broker_ids[3:]}
        assert http.post("/admin/v2/clusters/sim-cluster/failureDomains/rack-b", json=domain).status_code == 204
        assert http.post("/admin/v2/namespaces/tenant-a/orders/antiAffinity", content=b"spread").status_code == 204
    expected = {
        "namespaceIsolationPolicies": {"hot": policy},
        "failureDomains": {"rack-b": domain},
        "antiAffinityGroups": {"tenant-a/orders": "spread"},
    }
    engine = make_engine(db_url)
    client = PulsarAdminClient.from_url(sim.admin_url)
    ctx = JobContext("manual__2026-12-02T01:00:00+00:00", str(tmp_path / "work"))
    stages.stage_collect(spark, ctx, params_doc={"shedding_strategy": "ThresholdShedder"}, engine=engine, client=client)
    with session_scope(engine) as s:
        stored = repo.placement_policies(s, run_id=ctx.run_id)
        assert stored is not None and stored.contract() == expected
    stages.stage_compute_usage(spark, ctx, engine=engine)
    stages.stage_detect(_NoSpark(), ctx, engine=engine)
    scenario = stages.read_json(_NoSpark(), ctx.path(stages.SCENARIO_JSON))
    assert {k: scenario[k] for k in expected} == expected
    planned = stages.stage_plan(spark, ctx, engine=engine)
    with session_scope(engine) as s:
        plan = repo.get_plan(s, plan_id=planned["plan_id"])
    # ThresholdShedder picked hot bundles; the load manager keeps them where the policy allows nothing else
    assert any("tenant-b/events/" in n and "(NamespacePolicies)" in n for n in plan.summary["notes"]), plan.summary
    unloads = [a for a in plan.actions if a.kind == "unload"]
    assert not [a for a in unloads if a.namespace == "tenant-b/events"]
    assert all(a.destination_broker != hot_broker for a in unloads)


def test_drain_a_broker_through_the_stages_cordon_it_and_uncordon_it(spark, sim, db_url, tmp_path, capsys, monkeypatch):
    """Issue 19: mode=drain plans a move for every bundle of the broker and cordons it at once; the
    approved plan executes and the broker owns nothing; a later rebalance run never targets it (the
    guard refuses a cordoned destination, whatever the strategy planned); `brokers uncordon` returns it."""
    from pulsar_rebalance.cli import main
    from pulsar_rebalance.pipeline import stages

    engine = make_engine(db_url)
    client = PulsarAdminClient.from_url(sim.admin_url)
    owners = sim.state.owners()
    counts: dict[str, int] = {}
    for broker in owners.values():
        counts[broker] = counts.get(broker, 0) + 1
    drained = min(counts, key=lambda b: (counts[b], b))  # the lightest broker: its bundles fit elsewhere

    def run(run_id: str, params: dict) -> dict:
        ctx = JobContext(run_id, str(tmp_path / run_id.replace(":", "_")))
        stages.stage_collect(spark, ctx, params_doc=params, engine=engine, client=client)
        stages.stage_compute_usage(spark, ctx, engine=engine)
        stages.stage_detect(spark, ctx, engine=engine)
        planned = stages.stage_plan(spark, ctx, engine=engine)
        return {"ctx": ctx, **planned}

    drain = run("manual__2026-11-26T01:00:00+00:00", {"mode": "drain", "brokers": [drained]})
    with session_scope(engine) as s:
        plan = repo.get_plan(s, plan_id=drain["plan_id"])
        assert [c.broker for c in repo.cordoned(s, cluster_id=plan.cluster_id)] == [drained]
    unloads = [a for a in plan.actions if a.kind == "unload"]
    assert len(unloads) == counts[drained], plan.summary["guard"]
    assert all(a.source_broker == drained and a.destination_broker != drained for a in unloads)
    assert plan.summary["mode"]["mode"] == "drain" and plan.decision["label"] == "Drain"
    _approve(db_url, drain["plan_id"])
    report = stages.stage_execute(spark, drain["ctx"], engine=engine, client=client)
    assert report["status"] == "executed", report
    assert drained not in set(sim.state.owners().values())

    later = run("manual__2026-11-26T02:00:00+00:00", {"shedding_strategy": "ThresholdShedder"})
    with session_scope(engine) as s:
        plan = repo.get_plan(s, plan_id=later["plan_id"])
    assert all(a.destination_broker != drained for a in plan.actions if a.kind == "unload")
    # ThresholdShedder's placement picked the emptied broker (the least loaded): the guard re-placed those moves
    replaced = plan.summary["guard"]["replaced"]
    assert replaced and all(r["rules"] == ["cordoned"] and r["plannedDestination"] == drained for r in replaced)

    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)
    capsys.readouterr()
    assert main(["brokers", "cordoned"]) == 0
    assert drained in capsys.readouterr().out
    assert main(["brokers", "uncordon", drained, "--by", "alice"]) == 0
    assert capsys.readouterr().out.startswith(f"uncordoned: {drained}")
    assert main(["brokers", "cordoned", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize(
    "value",
    [
        {},
        [],
        {"b": [1, 2.5, None, True], "a": {"y": {}, "x": [[], {"k": 'é\n"q'}]}, "c": float("inf")},
        [{"z": 1, "a": [{"n": {"deep": {"deeper": [1, {"b": 2, "a": 1}]}}}]}, "s", 0],
        {"ints": {1: "a", 2: "b"}, "": ""},  # a non-string key: that object by one json.dumps, as json.dumps does
        "just a string",
        3,
    ],
)
def test_json_chunks_write_exactly_what_json_dumps_writes(value, tmp_path):
    from pulsar_rebalance.pipeline import stages

    assert "".join(stages.json_chunks(value)) == json.dumps(value, sort_keys=True)
    assert "".join(stages.json_chunks(value, depth=1)) == json.dumps(value, sort_keys=True)
    stages.write_json(_NoSpark(), str(tmp_path / "doc.json"), value)  # local: written in pieces, no Spark
    assert (tmp_path / "doc.json" / "part-00000.txt").read_text() == json.dumps(value, sort_keys=True) + "\n"
    assert (tmp_path / "doc.json" / "_SUCCESS").is_file()
