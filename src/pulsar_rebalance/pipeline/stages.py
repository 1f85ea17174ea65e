"""One function per DAG task, called by the thin entry points in ``spark_jobs/``.

Each stage reads what earlier stages left (Postgres rows, Parquet/JSON under the run's work dir),
does its work, and writes its results idempotently (a retried task overwrites, never duplicates).
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import logging
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pulsar_rebalance.core.planner import split_candidates
from pulsar_rebalance.errors import ConfigError, StoreError
from pulsar_rebalance.pipeline import context as C
from pulsar_rebalance.pipeline.collect import collect_snapshot, record_snapshot
from pulsar_rebalance.pipeline.detect import PLANNERS, build_scenario, decide, state_name
from pulsar_rebalance.pipeline.params import RunParams, resource_weights
from pulsar_rebalance.pipeline.usage import (
    broker_usage_rows,
    bundle_load_rows,
    carried,
    carry,
    latest,
    parse_reports,
    update_time_averages,
)
from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import session_scope

log = logging.getLogger(__name__)

SCENARIO_JSON = "scenario.json"
DECISION_JSON = "decision.json"


def _local(path: str) -> Path | None:
    """The local filesystem path of a work-dir path (no scheme or ``file:``), or None for any other Spark URL."""
    if "://" not in path:
        return Path(path)
    return Path(path[len("file://") :]) if path.startswith("file://") else None


def json_chunks(value: Any, depth: int = 4) -> Iterator[str]:
    """``json.dumps(value, sort_keys=True)`` in pieces: objects and arrays down to ``depth`` levels are
    written element by element, anything deeper (and any object with a non-string key) by one
    ``json.dumps`` call. ``"".join(json_chunks(v)) == json.dumps(v, sort_keys=True)``.

    A 10M-topic cluster's scenario is ~150 MiB of JSON: one ``json.dumps`` holds the encoder's chunk list
    and the joined string at once (+350 MiB of driver RSS, the detect_overload job's peak); written in
    pieces it costs a few MiB."""
    if depth <= 0 or not isinstance(value, dict | list) or not value:
        yield json.dumps(value, sort_keys=True)
        return
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            yield json.dumps(value, sort_keys=True)
            return
        for i, key in enumerate(sorted(value)):
            yield ("{" if i == 0 else ", ") + json.dumps(key) + ": "
            yield from json_chunks(value[key], depth - 1)
        yield "}"
        return
    for i, item in enumerate(value):
        yield "[" if i == 0 else ", "
        yield from json_chunks(item, depth - 1)
    yield "]"


def write_json(spark, path: str, value: Any) -> None:
    """One JSON document as a Spark text dataset (a directory with a part file and ``_SUCCESS``).

    On a local work dir it is written with plain file I/O in the same layout, piece by piece
    (:func:`json_chunks`), so a job that only writes JSON (detect_overload) starts no SparkSession and
    never holds the whole text; elsewhere (HDFS, S3, ...) Spark writes it.
    """
    local = _local(path)
    if local is None:
        text = json.dumps(value, sort_keys=True)
        spark.createDataFrame([(text,)], "value string").coalesce(1).write.mode("overwrite").text(path)
        return
    tmp = local.with_name(f".{local.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with (tmp / "part-00000.txt").open("w", encoding="utf-8") as out:
        out.writelines(json_chunks(value))
        out.write("\n")
    (tmp / "_SUCCESS").touch()
    shutil.rmtree(local, ignore_errors=True)
    tmp.rename(local)


def write_small_parquet(spark, path: str, rows: list[tuple], columns: list[tuple[str, str]]) -> None:
    """A small Parquet dataset (a plan's actions, their execution states) with ``columns`` as
    ``(name, "string" | "int")``.

    On a local work dir it is written with pyarrow in Spark's layout (a directory with one part file
    and ``_SUCCESS``; Spark reads it as ``string``/``int``), so a job with nothing else for Spark
    (plan_split without splits, execute_unload) starts no SparkSession; elsewhere Spark writes it.
    """
    local = _local(path)
    if local is None:
        spark.createDataFrame(rows, ", ".join(f"{n} {t}" for n, t in columns)).write.mode("overwrite").parquet(path)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    types: dict[str, pa.DataType] = {"string": pa.string(), "int": pa.int32()}
    schema = pa.schema([(n, types[t]) for n, t in columns])
    table = pa.Table.from_pylist([dict(zip((n for n, _ in columns), r)) for r in rows], schema=schema)
    tmp = local.with_name(f".{local.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    pq.write_table(table, tmp / "part-00000.snappy.parquet", compression="snappy")
    (tmp / "_SUCCESS").touch()
    shutil.rmtree(local, ignore_errors=True)
    tmp.rename(local)


def read_json(spark, path: str) -> Any:
    local = _local(path)
    if local is None:
        return json.loads("".join(r.value for r in spark.read.text(path).collect()))
    return json.loads("".join(p.read_text() for p in sorted(local.glob("part-*"))))


def _run(session, run_id: str):
    run = repo.get_run(session, run_id=run_id)
    return run, RunParams.from_json(run.params)


def stage_collect(spark, ctx: C.JobContext, *, params_doc: dict[str, Any], engine, client) -> dict[str, Any]:
    """Broker-level data read and validated in the driver; each broker's topic stats fetched and validated
    in Spark tasks, straight to Parquet (the driver never holds a topic row).

    Whole snapshot or nothing: the Postgres rows are written in one transaction that commits only once
    both Parquet datasets are there; if anything fails (an invalid answer, too many brokers missing,
    the database), the Parquet written so far is deleted and no row is committed.
    """
    from pulsar_rebalance.pipeline.collect import TOPIC_STATS_CONCURRENCY, TopicStatsFetcher
    from pulsar_rebalance.pipeline.transforms import BUNDLE_STATS_SCHEMA, fetch_topics, removed_on_failure

    params = RunParams.from_json(params_doc)  # bad params fail here, before any write
    snap = collect_snapshot(
        client,
        namespaces=params.namespaces,
        cluster=params.cluster,
        topic_stats=False,
        max_missing_brokers=params.max_missing_brokers,
    )
    weights = resource_weights(params.lb_config())
    with removed_on_failure(spark, [ctx.path(C.TOPICS), ctx.path(C.BUNDLE_STATS)], [ctx.work_dir, ctx.work_root]):
        outcome = fetch_topics(
            spark,
            list(snap.load_reports),
            TopicStatsFetcher.for_client(client, snap.namespaces),
            concurrency=TOPIC_STATS_CONCURRENCY,
            path=ctx.path(C.TOPICS),
        )
        topics = snap.add_topic_fetch(outcome, max_missing_brokers=params.max_missing_brokers)
        with session_scope(engine) as s:
            record_snapshot(s, snap, run_id=ctx.run_id, params=params.to_json(), work_dir=ctx.work_dir, weights=weights)
            spark.createDataFrame(snap.bundle_stats_rows, BUNDLE_STATS_SCHEMA).write.mode("overwrite").parquet(
                ctx.path(C.BUNDLE_STATS)
            )
    quality = snap.data_quality()
    if snap.unanswered or snap.without_topic_stats:
        log.warning("collect_load data quality: %s", quality)
    result: dict[str, Any] = {
        "cluster": snap.cluster,
        "brokers": len(snap.brokers),
        "namespaces": len(snap.namespaces),
        "bundles": len(snap.ownership),
        "topics": topics,
        "maxUsage": snap.max_weighted_usage(weights),
        "warnings": len(snap.check.warnings) if snap.check else 0,
        "dataQuality": quality,
        "placementPolicies": {k: len(v) for k, v in snap.placement_policies.items()},
    }
    log.info(
        "Collected cluster %s: %d brokers, %d namespaces, %d bundles, %d topics; busiest broker at %.1f%%",
        result["cluster"],
        result["brokers"],
        result["namespaces"],
        result["bundles"],
        result["topics"],
        100 * result["maxUsage"],
    )
    log.info(
        "Placement constraints stored with the run: %d namespace isolation policies, %d failure domains, "
        "%d namespaces in anti-affinity groups",
        *(
            len(snap.placement_policies[k])
            for k in ("namespaceIsolationPolicies", "failureDomains", "antiAffinityGroups")
        ),
    )
    return result


def stage_compute_usage(spark, ctx: C.JobContext, *, engine) -> dict[str, Any]:
    """Broker usage and bundle time averages (bundle-level: Python and Postgres), then every topic mapped onto
    the live ranges and summed per bundle (topic-level: Spark).

    In that order so that the driver's Python has released the bundle-level data (100,000 bundles at
    scale) before the Spark session starts: the two never hold their peak memory at the same time.
    """
    from pulsar_rebalance.pipeline import transforms as T

    t0 = time.perf_counter()
    with session_scope(engine) as s:
        run, params = _run(s, ctx.run_id)
        cfg = params.lb_config()
        reports = repo.broker_reports(s, run_id=ctx.run_id)
        prev = repo.latest_broker_ema(s, cluster_id=run.cluster_id, exclude_run_id=ctx.run_id)
        parsed = parse_reports(reports)
        rows = broker_usage_rows(reports, parsed, prev, cfg)
        repo.record_broker_load(s, run_id=ctx.run_id, rows=rows)
        averages = update_time_averages(
            parsed, repo.load_bundle_time_averages(s, cluster_id=run.cluster_id), ctx.run_id
        )
        repo.save_bundle_time_averages(s, cluster_id=run.cluster_id, run_id=ctx.run_id, data=averages)
        repo.record_bundle_load(s, run_id=ctx.run_id, rows=bundle_load_rows(parsed, averages))
    log.info(
        "Broker usage (weighted max, EMA): %s",
        ", ".join(f"{r['broker_id']} {100 * r['weighted_max_usage']:.1f}% ({100 * r['usage_ema']:.1f}%)" for r in rows),
    )
    log.info("Bundle time averages updated for %d bundles", len(averages))
    brokers = {r["broker_id"]: {"usage": r["weighted_max_usage"], "ema": r["usage_ema"]} for r in rows}
    bundles = len(averages)
    del reports, parsed, rows, averages
    gc.collect()

    t1 = time.perf_counter()
    with session_scope(engine) as s:
        boundaries = repo.live_boundaries(s, cluster_id=run.cluster_id)
    mapped = T.with_live_bundle(spark.read.parquet(ctx.path(C.TOPICS)), boundaries)
    T.bundle_load(mapped).write.mode("overwrite").parquet(ctx.path(C.BUNDLE_LOAD))
    # the mismatch count comes from the (bundle-level) result just written; topics are re-read only for examples
    mismatch_count = T.total_mismatches(spark.read.parquet(ctx.path(C.BUNDLE_LOAD)))
    examples = [r.asDict() for r in T.mismatches(mapped).limit(10).collect()] if mismatch_count else []
    t2 = time.perf_counter()
    with session_scope(engine) as s:
        if mismatch_count:
            repo.audit(
                s,
                event="topic_bundle_mismatch",
                actor="compute_usage",
                run_id=ctx.run_id,
                details={"count": mismatch_count, "examples": examples},
            )
        repo.set_run_stage(s, run_id=ctx.run_id, stage="compute_usage")
    if mismatch_count:
        log.warning(
            "%d topic(s) reported under a bundle their hash does not fall into, e.g. %s", mismatch_count, examples[:3]
        )
    return {
        "brokers": brokers,
        "bundles": bundles,
        "topicBundleMismatches": mismatch_count,
        "seconds": {"state": round(t1 - t0, 3), "topics": round(t2 - t1, 3)},
    }


def topic_rates(
    spark, ctx: C.JobContext, bundles: list[str], boundaries: dict[str, list[int]]
) -> dict[str, dict[str, dict[str, float]]]:
    """The rates of every topic of ``bundles`` (full names of live ranges), read from the run's
    ``topics.parquet`` by Spark: ``{bundle: {topic: {msgRateIn, msgRateOut, msgThroughputIn, msgThroughputOut}}}``."""
    from pulsar_rebalance.pipeline import transforms as T

    out: dict[str, dict[str, dict[str, float]]] = {}
    for r in T.topics_in_bundles(spark.read.parquet(ctx.path(C.TOPICS)), bundles, boundaries).collect():
        out.setdefault(f"{r.namespace}/{r.bundle}", {})[r.topic] = {
            "msgRateIn": r.msg_rate_in,
            "msgRateOut": r.msg_rate_out,
            "msgThroughputIn": r.msg_throughput_in,
            "msgThroughputOut": r.msg_throughput_out,
        }
    return out


def stage_detect(spark, ctx: C.JobContext, *, engine, now_ms: int | None = None) -> dict[str, Any]:
    """The configured strategy's decision on the run's data; a planner's split candidates' topics from Spark.

    The Spark part (the topics of the split candidates, a scan of every topic; skipped, with no session
    started, when no bundle is a candidate) runs before the bundle-level data is loaded, and the driver JVM
    then gives its free heap back (:func:`jvm.release_heap`), so the JVM's peak and the decision's Python peak
    are not held at the same time (at 10M topics ~1 GiB and ~0.7 GiB).
    """
    now_ms = now_ms or int(time.time() * 1000)
    with session_scope(engine) as s:
        run, params = _run(s, ctx.run_id)
        cfg = params.lb_config()
        reports = repo.broker_reports(s, run_id=ctx.run_id)
        boundaries = repo.live_boundaries(s, cluster_id=run.cluster_id)
    live = {f"{ns}/0x{a:08x}_0x{b:08x}" for ns, bs in boundaries.items() for a, b in zip(bs, bs[1:])}
    bundle_topics: dict[str, dict[str, dict[str, float]]] | None = None
    if params.shedding_strategy in PLANNERS:  # the planner splits on topic rates: its candidates' topics
        from pulsar_rebalance.pipeline.jvm import release_heap

        wanted = [b for b in split_candidates(reports) if b in live]  # a transitional answer's bundle is left out
        bundle_topics = {}
        if wanted:  # none (no bundle carries a large share of its broker): no Spark session at all
            bundle_topics = topic_rates(spark, ctx, wanted, boundaries)
            release_heap(spark)
        log.info(
            "Topic rates read for %d split candidate(s) (%d topics)", len(wanted), sum(map(len, bundle_topics.values()))
        )
    with session_scope(engine) as s:
        averages = repo.load_bundle_time_averages(s, cluster_id=run.cluster_id)
        bundle_data = {b: latest(e) for b, e in averages.items() if b in live}
        del averages  # its entries also hold the run's starting values, as big again: freed for decide()
        grace_ms = cfg.load_balancer_shedding_grace_period_minutes * 60_000
        since = dt.datetime.fromtimestamp((now_ms - grace_ms) / 1000, dt.UTC)
        recent = repo.recently_unloaded_bundles(s, cluster_id=run.cluster_id, since=since)
        name = state_name(params)
        state = carried(repo.load_strategy_state(s, cluster_id=run.cluster_id, name=name), ctx.run_id)
        policies = repo.placement_policies(s, run_id=ctx.run_id)
    scenario = build_scenario(
        params=params,
        reports=reports,
        bundle_data=bundle_data,
        namespace_boundaries=boundaries,
        recently_unloaded=recent,
        state=state,
        now_ms=now_ms,
        bundle_topics=bundle_topics,
        placement_policies=policies.contract() if policies is not None else None,
    )
    result = decide(scenario)
    write_json(spark, ctx.path(SCENARIO_JSON), scenario)
    write_json(spark, ctx.path(DECISION_JSON), result)
    with session_scope(engine) as s:
        repo.save_strategy_state(
            s,
            cluster_id=run.cluster_id,
            name=name,
            run_id=ctx.run_id,
            state=carry(ctx.run_id, state, result.get("state")),
        )
        repo.set_run_stage(s, run_id=ctx.run_id, stage="detect_overload")
    cyc = result["cycle"]
    executed = len((cyc.get("executed") or {}).get("unloads", cyc.get("unloads", [])))
    log.info(
        "%s decided %s (%s): %d unload(s) selected, %d the load manager would execute, %d split(s)",
        params.shedding_strategy,
        cyc.get("label"),
        cyc.get("reason"),
        len(cyc.get("unloads", [])),
        executed,
        len(cyc.get("splits", [])),
    )
    return {
        "label": cyc.get("label"),
        "reason": cyc.get("reason"),
        "unloads": len(cyc.get("unloads", [])),
        "executedUnloads": executed,
        "splits": len(cyc.get("splits", [])),
    }


def is_scheduled(run_id: str, run_type: str | None = None) -> bool:
    """Whether the Airflow run is a scheduled one: its ``run_type`` when known (``scheduled``, or the
    enum's rendering ``DagRunType.SCHEDULED``), else its id (scheduled runs are ``scheduled__<date>``)."""
    if run_type:
        return run_type.rsplit(".", 1)[-1].lower() == "scheduled"
    return run_id.startswith("scheduled__")


def stage_plan(spark, ctx: C.JobContext, *, engine, now=None, run_type: str | None = None) -> dict[str, Any]:
    """Plan the run. A *scheduled* run that finds a pending plan of its cluster still within its approval
    window stores an empty plan ("skipped: plan X awaits a decision") and supersedes nothing: the
    operator's plan under review stays. Any other run's plan supersedes the cluster's pending plans."""
    from pulsar_rebalance.pipeline.planning import build_plan

    now = now or dt.datetime.now(dt.UTC)
    decision = read_json(spark, ctx.path(DECISION_JSON))
    with session_scope(engine) as s:
        run, params = _run(s, ctx.run_id)
        existing = repo.plan_for_run(s, run_id=ctx.run_id)
        reports = repo.broker_reports(s, run_id=ctx.run_id)
        boundaries = repo.live_boundaries(s, cluster_id=run.cluster_id)
        ownership = repo.current_ownership(s, cluster_id=run.cluster_id)
        snapshot_check = repo.snapshot_check(s, run_id=ctx.run_id)
        stored_policies = repo.placement_policies(s, run_id=ctx.run_id)
        fenced = [c.broker for c in repo.cordoned(s, cluster_id=run.cluster_id)]
    policies = stored_policies.contract() if stored_policies is not None else None
    if existing is not None:  # a retried task returns the plan it already made (plans are immutable)
        return {"plan_id": existing.plan_id, "status": existing.status, "actions": len(existing.actions)}
    if is_scheduled(ctx.run_id, run_type):
        with session_scope(engine) as s:
            repo.expire_due_plans(s, now=now, cluster_id=run.cluster_id)
            waiting = repo.plans_awaiting_decision(s, cluster_id=run.cluster_id, now=now)
        if waiting:
            plan_id, expires = waiting[0]
            until = f"expires {expires:%Y-%m-%d %H:%M:%S} UTC" if expires is not None else "no expiry"
            reason = f"skipped: plan {plan_id} awaits a decision ({until})"
            decision = {"cycle": {"label": "Skipped", "reason": reason, "unloads": [], "splits": []}}
            draft = build_plan(
                decision=decision,
                params=params,
                reports=reports,
                topics_by_bundle={},
                ownership=ownership,
                snapshot_check=snapshot_check,
                placement_policies=policies,
            )
            draft.summary["skipped"] = {
                "awaits": plan_id,
                "expiresAt": expires.isoformat() if expires is not None else None,
            }
            return _store_plan(spark, ctx, engine, run, params, draft, decision, now, supersede=False)
    if params.mode != "rebalance":  # drain or fill the named brokers instead of running the shedder
        from pulsar_rebalance.pipeline.planning import build_mode_plan

        if params.mode == "drain":  # cordoned at once: from now on no plan of any mode targets them
            with session_scope(engine) as s:
                repo.cordon(
                    s,
                    cluster_id=run.cluster_id,
                    brokers=list(params.brokers),
                    by=f"run {ctx.run_id}",
                    reason="drained (mode=drain)",
                    run_id=ctx.run_id,
                )
            fenced = sorted({*fenced, *params.brokers})
        draft, cycle = build_mode_plan(
            params=params,
            reports=reports,
            ownership=ownership,
            placement_policies=policies,
            cordoned=fenced,
            snapshot_check=snapshot_check,
        )
        return _store_plan(spark, ctx, engine, run, params, draft, {"cycle": cycle}, now)
    if params.fix_policy_violations:  # this run plans only the moves that fix placement-policy violations
        from pulsar_rebalance.pipeline.planning import build_fix_plan

        draft, cycle = build_fix_plan(
            params=params,
            reports=reports,
            ownership=ownership,
            placement_policies=policies,
            snapshot_check=snapshot_check,
            cordoned=fenced,
        )
        return _store_plan(spark, ctx, engine, run, params, draft, {"cycle": cycle}, now)
    if params.rollback_plan:  # this run returns another plan's moves instead of running the shedder
        from pulsar_rebalance.pipeline.planning import build_rollback_plan

        with session_scope(engine) as s:
            original = repo.get_plan(s, plan_id=params.rollback_plan)
        if original.cluster_id != run.cluster_id:
            raise ConfigError(f"plan {original.plan_id} belongs to another cluster", key="rollback_plan")
        draft = build_rollback_plan(
            original=original, params=params, reports=reports, ownership=ownership, placement_policies=policies
        )
        # what collect saw, for the reviewer, then the rollback's own (e.g. predicted to raise the busiest broker)
        draft.summary["warnings"] = list(snapshot_check.get("warnings", [])) + list(draft.summary["warnings"])
        decision = {
            "cycle": {
                "label": "Rollback",
                "reason": f"rollback of plan {original.plan_id}",
                "unloads": [],
                "splits": [],
            }
        }
        return _store_plan(spark, ctx, engine, run, params, draft, decision, now)
    split_bundles = [sp["bundle"] for sp in decision["cycle"].get("splits", [])]
    topics_by_bundle: dict[str, dict[str, dict[str, float]]] = {}
    t0 = time.perf_counter()
    if split_bundles:  # topic rows of the (at most loadBalancerMaxNumberOfBundlesToSplitPerCycle) bundles to split
        topics_by_bundle = topic_rates(spark, ctx, split_bundles, boundaries)
    topics_s = time.perf_counter() - t0
    draft = build_plan(
        decision=decision,
        params=params,
        reports=reports,
        topics_by_bundle=topics_by_bundle,
        ownership=ownership,
        snapshot_check=snapshot_check,
        placement_policies=policies,
        cordoned=fenced,
    )
    return _store_plan(spark, ctx, engine, run, params, draft, decision, now, topics_s=topics_s)


def _store_plan(
    spark,
    ctx: C.JobContext,
    engine,
    run,
    params: RunParams,
    draft,
    decision,
    now,
    *,
    topics_s: float = 0.0,
    supersede: bool = True,
) -> dict[str, Any]:
    cfg = params.lb_config()
    with session_scope(engine) as s:
        expired = repo.expire_due_plans(s, now=now, cluster_id=run.cluster_id)  # TTLs end even without a gate
        plan_id = repo.create_plan(
            s,
            run_id=ctx.run_id,
            cluster_id=run.cluster_id,
            status="empty" if draft.empty else "pending",
            expires_at=now + dt.timedelta(minutes=params.approval_timeout_minutes),
            dry_run=params.dry_run,
            strategies=draft.summary["strategies"],
            config=cfg.to_pulsar_dict(),
            summary=draft.summary,
            decision=decision["cycle"],
            actions=draft.actions,
            required_approvals=params.required_approvals,
            supersede=supersede,
        )
        repo.set_run_stage(s, run_id=ctx.run_id, stage="plan_split")
        if draft.empty:
            repo.finish_run(s, run_id=ctx.run_id, status="nothing_to_do")
        superseded = repo.plans_superseded_by(s, plan_id=plan_id)
    _log_plan(plan_id, draft, expired=expired, superseded=superseded)
    rows = [
        (
            plan_id,
            a.seq,
            a.kind,
            a.namespace,
            a.bundle_range,
            a.source_broker,
            a.destination_broker or "",
            json.dumps(a.boundaries),
            a.reason,
        )
        for a in draft.actions
    ]
    write_small_parquet(
        spark,
        ctx.path(C.ACTIONS),
        rows,
        [
            ("plan_id", "string"),
            ("seq", "int"),
            ("kind", "string"),
            ("namespace", "string"),
            ("bundle", "string"),
            ("source", "string"),
            ("destination", "string"),
            ("boundaries", "string"),
            ("reason", "string"),
        ],
    )
    return {
        "plan_id": plan_id,
        "status": "empty" if draft.empty else "pending",
        "actions": len(draft.actions),
        "summary": {
            k: draft.summary[k]
            for k in ("numBundleSplits", "numBundleUnloads", "maxUsageBefore", "maxUsageAfterPredicted", "notes")
        },
        "guard": {k: draft.summary["guard"][k] for k in ("mode", "kept", "dropped")},
        "seconds": {"topics": round(topics_s, 3)},
    }


def _log_plan(plan_id: str, draft, *, expired: list[str], superseded: list[str]) -> None:
    """What plan_split did, for the operator reading the task log: the plan and every action with its reason."""
    if draft.empty:
        from pulsar_rebalance.core.plan_summary import why_nothing_planned

        why = why_nothing_planned(draft.summary)
        log.info("Plan %s is empty: nothing to do. %s", plan_id, why[0])
    else:
        log.info(
            "Plan %s: %d split(s), %d unload(s); busiest broker %.1f%% -> %.1f%% (predicted); waits for approval",
            plan_id,
            draft.summary["numBundleSplits"],
            draft.summary["numBundleUnloads"],
            100 * (draft.summary["maxUsageBefore"] or 0),
            100 * (draft.summary["maxUsageAfterPredicted"] or 0),
        )
    for a in draft.actions:
        what = (
            f"split {a.bundle} at {[f'0x{b:08x}' for b in a.boundaries]}"
            if a.kind == "split"
            else f"unload {a.bundle} {a.source_broker} -> {a.destination_broker}"
        )
        log.info("  [%d] %s: %s", a.seq, what, a.reason)
    for note in draft.notes:
        log.info("  note: %s", note)
    guard = draft.summary.get("guard") or {}
    for f in guard.get("failed") or ():
        log.warning(
            "  do-no-harm guard %s %s %s %s -> %s: %s",
            "dropped" if guard.get("mode") == "cut" else "flagged (kept)",
            f["kind"],
            f["bundle"],
            f["source"],
            f["destination"],
            f["reason"],
        )
    if expired:
        log.info("Expired (approval window over): %s", ", ".join(expired))
    if superseded:
        log.info("Superseded by %s: %s", plan_id, ", ".join(superseded))


def stage_execute(spark, ctx: C.JobContext, *, engine, client) -> dict[str, Any]:
    """Execute the run's approved plan. ``spark=None`` (the job's ``--without-spark``) skips only the
    Parquet copy of the action states; Postgres holds the whole outcome either way."""
    from pulsar_rebalance.pipeline.execute import ExecutionPolicy, execute_plan, measure_after

    with session_scope(engine) as s:
        run, params = _run(s, ctx.run_id)
        plan = repo.plan_for_run(s, run_id=ctx.run_id)
    if plan is None:
        raise RuntimeError(f"run {ctx.run_id} has no plan: plan_split did not run")
    failure: BaseException | None = None
    try:
        report = execute_plan(
            engine,
            client,
            plan_id=plan.plan_id,
            after_snapshot=measure_after(params),
            policy=ExecutionPolicy.from_params(params),
        )
    except BaseException as exc:
        failure = exc
        raise
    finally:
        try:
            states = _record_execution(engine, ctx, plan.plan_id)
        except StoreError as exc:
            if failure is None:
                raise
            log.error(
                "could not record the end of execute_unload for run %s (%s); the failure above stands", ctx.run_id, exc
            )
            states = []
        if states and spark is not None:
            write_small_parquet(
                spark,
                ctx.path(C.EXECUTION),
                states,
                [
                    ("plan_id", "string"),
                    ("seq", "int"),
                    ("kind", "string"),
                    ("namespace", "string"),
                    ("bundle", "string"),
                    ("state", "string"),
                    ("attempts", "int"),
                    ("error", "string"),
                ],
            )
    return report.to_json()


def _record_execution(engine, ctx: C.JobContext, plan_id: str) -> list[tuple]:
    """The run's stage and (once the plan is final) its status; returns the action states."""
    with session_scope(engine) as s:
        final = repo.get_plan(s, plan_id=plan_id)
        repo.set_run_stage(s, run_id=ctx.run_id, stage="execute_unload")
        if final.status in ("executed", "partially_executed", "failed"):
            repo.finish_run(s, run_id=ctx.run_id, status="succeeded" if final.status == "executed" else "failed")
    return [
        (final.plan_id, a.seq, a.kind, a.namespace, a.bundle_range, a.state, a.attempts, a.error or "")
        for a in final.actions
    ]
