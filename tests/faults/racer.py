"""A racing decider, run as its own process by test_decision_races.py (not a test module).

Reads commands from stdin, one per line, acts at once and answers one JSON line on stdout:

    decide <plan_id> <approved|rejected> <who> [<now iso>]   -> repository.decide_plan
    expire <plan_id> <now iso>                               -> repository.expire_plan (the gate's sweep)

Answer: ``{"plan": ..., "won": true}`` or ``{"plan": ..., "won": false, "error": "<class>: <message>"}``.
The database URL comes from PULSAR_REBALANCE_DATABASE_URL. Ends at EOF.
"""

from __future__ import annotations

import datetime as dt
import json
import sys


def main() -> int:
    from pulsar_rebalance.errors import RebalanceError
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import database_url, make_engine, session_scope

    engine = make_engine(database_url())
    with engine.connect():  # connect before the first race, not during it
        pass
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd, plan_id, *rest = line.split()
        answer: dict = {"plan": plan_id}
        try:
            with session_scope(engine) as s:
                if cmd == "decide":
                    decision, who, *when = rest
                    now = dt.datetime.fromisoformat(when[0]) if when else None
                    repo.decide_plan(s, plan_id=plan_id, decision=decision, decided_by=who, now=now)
                    answer["won"] = True
                else:
                    answer["won"] = repo.expire_plan(s, plan_id=plan_id, now=dt.datetime.fromisoformat(rest[0]))
        except RebalanceError as exc:
            answer.update(won=False, error=f"{type(exc).__name__}: {exc}")
        print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
