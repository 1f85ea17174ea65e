"""Fixtures for the plan pages: a state DB holding plans made by the real planning code.

``seeded_db`` builds plans with ``pipeline.planning.build_plan`` (the function plan_split runs) on
hand-made load reports and stores them with the repository, so the pages render what planning
really stores, without Spark. The browser test (``test_browser.py``) makes its plan with the real
pipeline stages instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest


def _report(cpu: float, bw: float, bundles: dict[str, tuple[float, float, int]]) -> dict:
    last = {b: {"msgRateIn": r / 2, "msgRateOut": r / 2, "msgThroughputIn": t / 2, "msgThroughputOut": t / 2,
                "consumerCount": 2 * n, "producerCount": n, "topics": n, "cacheSize": 0}
            for b, (r, t, n) in bundles.items()}
    rate = sum(r for r, _, _ in bundles.values())
    thr = sum(t for _, t, _ in bundles.values())
    return {"cpu": {"usage": cpu, "limit": 100.0}, "memory": {"usage": 10.0, "limit": 100.0},
            "directMemory": {"usage": 5.0, "limit": 100.0},
            "bandwidthIn": {"usage": bw, "limit": 100.0}, "bandwidthOut": {"usage": bw, "limit": 100.0},
            "msgRateIn": rate / 2, "msgRateOut": rate / 2, "msgThroughputIn": thr / 2, "msgThroughputOut": thr / 2,
            "lastStats": last, "numBundles": len(bundles), "bundles": list(bundles)}


REPORTS = {
    "broker-1:8080": _report(85.0, 80.0, {"t/ns/0x00000000_0x40000000": (900.0, 9 * 2**20, 12),
                                          "t/ns/0x40000000_0x80000000": (300.0, 3 * 2**20, 4)}),
    "broker-2:8080": _report(20.0, 15.0, {"t/ns/0x80000000_0xc0000000": (200.0, 2**20, 3)}),
    "broker-3:8080": _report(25.0, 20.0, {"t/ns/0xc0000000_0xffffffff": (250.0, 2**20, 3)}),
}


@dataclass(frozen=True)
class Seeded:
    url: str
    pending: str   # a pending plan: one unload
    executed: str  # an executed plan with an approval and measured usage


@pytest.fixture
def seeded_db(db_url, monkeypatch) -> Iterator[Seeded]:
    from pulsar_rebalance.pipeline.params import RunParams
    from pulsar_rebalance.pipeline.planning import build_plan
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import dispose_engines, make_engine, session_scope

    params = RunParams.from_json({})
    decision = {"cycle": {"label": "Success", "reason": "Overloaded", "splits": [], "unloads": [
        {"broker": "broker-1:8080", "bundle": "t/ns/0x00000000_0x40000000", "destination": "broker-2:8080",
         "reason": "Overloaded: broker-1:8080 usage 0.85 >= avg 0.43 + threshold 0.10"}]}}
    draft = build_plan(decision=decision, params=params, reports=REPORTS, topics_by_bundle={},
                       ownership={b: br for br, r in REPORTS.items() for b in r["lastStats"]})
    draft.summary["warnings"] = ["2 topics were reported under a bundle their hash does not fall into"]
    engine = make_engine(db_url)
    now = datetime.now(UTC)
    ids = []
    with session_scope(engine) as s:
        cid = repo.get_or_create_cluster(s, name="sim-cluster", admin_url="http://pulsar:8080")
    for run_id in ("scheduled__2026-11-23T10:00:00+00:00", "manual__2026-11-23T11:00:00+00:00"):
        with session_scope(engine) as s:
            repo.start_run(s, run_id=run_id, cluster_id=cid, params=params.to_json())
            ids.append(repo.create_plan(
                s, run_id=run_id, cluster_id=cid, status="pending", expires_at=now + timedelta(hours=1),
                dry_run=False, strategies=draft.summary["strategies"], config={"loadBalancerSheddingEnabled": False},
                summary=draft.summary, decision=decision["cycle"], actions=draft.actions))
        if len(ids) == 1:  # execute the first before the second supersedes it
            with session_scope(engine) as s:
                repo.decide_plan(s, plan_id=ids[0], decision="approved", decided_by="alice", comment="off-peak, <script>alert(1)</script> go")
                repo.set_plan_status(s, plan_id=ids[0], status="executing")
                for a in repo.get_plan(s, plan_id=ids[0]).actions:
                    repo.transition_action(s, action_id=a.id, to="in_progress")
                    repo.transition_action(s, action_id=a.id, to="completed")
                repo.set_plan_status(s, plan_id=ids[0], status="executed", result={
                    "max_usage_after": 0.52,
                    "broker_usage_after": {"broker-1:8080": 0.52, "broker-2:8080": 0.47, "broker-3:8080": 0.25}})
    executed, pending = ids
    monkeypatch.setenv("PULSAR_REBALANCE_DATABASE_URL", db_url)
    yield Seeded(url=db_url, pending=pending, executed=executed)
    dispose_engines(db_url)
