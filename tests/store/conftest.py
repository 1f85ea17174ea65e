"""Fixtures for the state-store tests. ``pg_server`` and ``db_url`` come from ``tests/conftest.py``.

Fixtures only (the suite runs with ``--import-mode=importlib``, so test modules cannot import each
other); ``make_plan`` is a factory fixture.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from pulsar_rebalance.store import dispose_engines, make_engine, session_scope
from pulsar_rebalance.store import repository as repo


@pytest.fixture(autouse=True)
def _dispose_cached_engines() -> Iterator[None]:
    """Every test gets its own database; close the cached pools so idle connections don't pile up."""
    yield
    dispose_engines()


@pytest.fixture
def engine(db_url: str) -> Engine:
    return make_engine(db_url)


@dataclass(frozen=True)
class World:
    """A cluster (name ``c1``) with one started run (``run-1``)."""

    engine: Engine
    cluster_id: int
    run_id: str


@pytest.fixture
def world(engine: Engine) -> World:
    with session_scope(engine) as s:
        cluster_id = repo.get_or_create_cluster(s, name="c1", admin_url="http://pulsar:8080")
        repo.start_run(s, run_id="run-1", cluster_id=cluster_id, params={"trigger": "test"}, work_dir="/tmp/w")
    return World(engine=engine, cluster_id=cluster_id, run_id="run-1")


def unload_action(
    bundle: str, src: str = "b1:8080", dst: str | None = "b2:8080", reason: str = "b1 overloaded"
) -> dict[str, Any]:
    return {"kind": "unload", "bundle": bundle, "source_broker": src, "destination_broker": dst, "reason": reason}


@pytest.fixture
def make_plan(world: World) -> Callable[..., str]:
    """``make_plan(run_id=None, actions=None, expires_at=None, dry_run=False) -> plan_id``: starts the run if
    needed and creates a pending plan (default: one unload of ``public/default/0x00000000_0x80000000``)
    in its own committed transaction."""

    def _make(
        *,
        run_id: str | None = None,
        actions: list[dict[str, Any]] | None = None,
        expires_at: datetime | None = None,
        dry_run: bool = False,
        required_approvals: int = 1,
    ) -> str:
        run_id = run_id or world.run_id
        chosen = actions if actions is not None else [unload_action("public/default/0x00000000_0x80000000")]
        with session_scope(world.engine) as s:
            repo.start_run(s, run_id=run_id, cluster_id=world.cluster_id)
            return repo.create_plan(
                s,
                run_id=run_id,
                cluster_id=world.cluster_id,
                status="pending",
                expires_at=expires_at or datetime.now(UTC) + timedelta(hours=1),
                dry_run=dry_run,
                strategies={"shedder": "ThresholdShedder"},
                config={"loadBalancerBrokerThresholdShedderPercentage": 10},
                summary={"actions": len(chosen)},
                decision={"label": "Unload"},
                actions=chosen,
                required_approvals=required_approvals,
            )

    return _make


@pytest.fixture
def unload() -> Callable[..., dict[str, Any]]:
    """``unload(bundle, src="b1:8080", dst="b2:8080", reason=...) -> action dict`` for create_plan."""
    return unload_action
