"""Two people deciding one plan at once, and an approval racing the plan's expiry, each from its own
process through ``store.repository`` (decide_plan / expire_plan): exactly one decision per plan, the
loser told why, nothing decided twice, no plan left undecided."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import func, select

from pulsar_rebalance.store import repository as repo
from pulsar_rebalance.store.engine import make_engine, session_scope
from pulsar_rebalance.store.tables import Approval, AuditLog

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

RACER = Path(__file__).with_name("racer.py")
RACES = 60


def _pending_plans(engine, n: int, *, expires_at=None) -> list[str]:
    ids = []
    with session_scope(engine) as s:
        for i in range(n):  # one cluster each: a newer pending plan of a cluster supersedes the older one
            cluster_id = repo.get_or_create_cluster(s, name=f"race-cluster-{i}", admin_url="http://127.0.0.1:1")
            run_id = f"race-{i:03d}"
            repo.start_run(s, run_id=run_id, cluster_id=cluster_id, params={})
            ids.append(
                repo.create_plan(
                    s,
                    run_id=run_id,
                    cluster_id=cluster_id,
                    status="pending",
                    expires_at=expires_at or dt.datetime.now(dt.UTC) + dt.timedelta(hours=1),
                    dry_run=False,
                    strategies={},
                    config={},
                    summary={},
                    decision={},
                    actions=[
                        {
                            "kind": "unload",
                            "bundle": "t/ns/0x00000000_0xffffffff",
                            "source_broker": "b1:8080",
                            "destination_broker": "b2:8080",
                            "reason": "race",
                        }
                    ],
                )
            )
    return ids


class _Racers:
    """Two racer processes; ``race(cmd_a, cmd_b)`` sends both commands at once and returns both answers."""

    def __init__(self, db_url: str) -> None:
        env = {**__import__("os").environ, "PULSAR_REBALANCE_DATABASE_URL": db_url}
        self.procs = [
            subprocess.Popen(
                [sys.executable, str(RACER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
            )
            for _ in range(2)
        ]
        for p in self.procs:
            assert json.loads(p.stdout.readline()) == {"ready": True}

    def race(self, *commands: str) -> list[dict]:
        for p, c in zip(self.procs, commands):
            p.stdin.write(c + "\n")
        for p in self.procs:  # flushed back to back: both requests reach Postgres together
            p.stdin.flush()
        return [json.loads(p.stdout.readline()) for p in self.procs]

    def close(self) -> None:
        for p in self.procs:
            p.stdin.close()
            p.wait(timeout=30)


@pytest.fixture
def racers(db_url):
    r = _Racers(db_url)
    yield r
    r.close()


def _approvals(engine) -> Counter:
    with session_scope(engine) as s:
        return Counter(dict(s.execute(select(Approval.plan_id, func.count()).group_by(Approval.plan_id)).all()))


def test_two_people_deciding_at_once(db_url, racers, figures):
    engine = make_engine(db_url)
    plans = _pending_plans(engine, RACES)
    outcomes = []
    for i, plan_id in enumerate(plans):
        other = "approved" if i % 2 else "rejected"  # approve vs approve, approve vs reject
        outcomes.append(racers.race(f"decide {plan_id} approved alice", f"decide {plan_id} {other} bob"))

    problems, both_won, none_won = [], 0, 0
    with session_scope(engine) as s:
        for plan_id, answers in zip(plans, outcomes):
            winners = [who for who, a in zip(("alice", "bob"), answers) if a["won"]]
            plan = repo.get_plan(s, plan_id=plan_id)
            if len(winners) != 1:
                both_won += len(winners) > 1
                none_won += not winners
                problems.append(f"{plan_id}: winners {winners}")
                continue
            loser = next(a for a in answers if not a["won"])
            if not (loser["error"].startswith("PlanAlreadyDecidedError") and f"by {winners[0]} at" in loser["error"]):
                problems.append(f"{plan_id}: unclear loser message {loser['error']!r}")
            if plan.approval is None or plan.approval.decided_by != winners[0] or plan.status != plan.approval.decision:
                problems.append(f"{plan_id}: recorded {plan.status} by {plan.approval and plan.approval.decided_by}")
        decisions = Counter(
            dict(
                s.execute(
                    select(AuditLog.plan_id, func.count())
                    .where(AuditLog.event.in_(["plan.approved", "plan.rejected"]))
                    .group_by(AuditLog.plan_id)
                ).all()
            )
        )
    approvals = _approvals(engine)
    duplicates = sum(n - 1 for n in approvals.values() if n > 1) + sum(n - 1 for n in decisions.values() if n > 1)
    lost = sum(1 for p in plans if approvals[p] == 0)
    won_by = Counter(w for answers in outcomes for w, a in zip(("alice", "bob"), answers) if a["won"])
    figures.faults, figures.duplicates, figures.lost = RACES, duplicates + both_won, lost
    figures.survived = RACES - len({p.split(":")[0] for p in problems})
    figures.note = (
        f"{RACES} races from 2 processes; alice won {won_by['alice']}, bob {won_by['bob']}; "
        "every loser told who decided when"
    )
    assert not problems and duplicates == 0 and lost == 0 and none_won == 0


def test_approval_racing_expiry(db_url, racers, figures):
    """The approver's clock reads 1 ms before the deadline, the gate's sweep 1 ms after: whichever
    locks the plan first wins; the other is told (expired at ... / returns False)."""
    engine = make_engine(db_url)
    deadline = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=30)
    plans = _pending_plans(engine, RACES, expires_at=deadline)
    before, after = (deadline + dt.timedelta(milliseconds=d) for d in (-1, 1))
    outcomes = []
    for i, plan_id in enumerate(plans):
        cmds = [f"decide {plan_id} approved alice {before.isoformat()}", f"expire {plan_id} {after.isoformat()}"]
        if i % 2:  # alternate which process sends first
            cmds.reverse()
            outcomes.append(list(reversed(racers.race(*cmds))))
        else:
            outcomes.append(racers.race(*cmds))

    problems, results = [], Counter()
    with session_scope(engine) as s:
        for plan_id, (approve, expire) in zip(plans, outcomes):
            plan = repo.get_plan(s, plan_id=plan_id)
            if approve["won"] == expire["won"]:
                problems.append(f"{plan_id}: approve won={approve['won']} expire won={expire['won']}")
            elif approve["won"]:
                results["approved"] += 1
                if plan.status != "approved":
                    problems.append(f"{plan_id}: approval won but plan is {plan.status}")
            else:
                results["expired"] += 1
                if (
                    plan.status != "expired"
                    or not approve["error"].startswith("PlanExpiredError")
                    or "expired at" not in approve["error"]
                ):
                    problems.append(
                        f"{plan_id}: expiry won, plan {plan.status}, approver told {approve.get('error')!r}"
                    )
    approvals = _approvals(engine)
    duplicates = sum(n - 1 for n in approvals.values() if n > 1)
    lost = sum(1 for p in plans if approvals[p] == 0)
    figures.faults, figures.duplicates, figures.lost = RACES, duplicates, lost
    figures.survived = RACES - len(problems)
    figures.note = f"{RACES} races; approval won {results['approved']}, expiry won {results['expired']}; never both"
    assert not problems and duplicates == 0 and lost == 0
