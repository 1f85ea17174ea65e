"""Property-based fuzzing of admin answers through collect_load (issue #11).

Hypothesis mutates the simulator's real answers - load reports, topic stats, ownedNamespaces - at
any depth (replace a member by any JSON value, including NaN, Infinity, 2**63 and 1e30; delete a
member; add one) and runs the whole collect stage (real HTTP, real Postgres, real Spark Parquet).
Properties: collect either commits a whole snapshot (one more run, its brokers' loads, its Parquet)
or nothing (every table's row count unchanged, no work directory), and it never raises anything but
our own error types (:class:`~pulsar_rebalance.errors.RebalanceError`).
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pulsar_rebalance.errors import RebalanceError
from pulsar_rebalance.pipeline.context import JobContext
from pulsar_rebalance.pulsar_admin import PulsarAdminClient
from pulsar_rebalance.simulator.generator import generate_cluster
from pulsar_rebalance.simulator.server import SimulatedPulsar
from pulsar_rebalance.store.engine import make_engine

from .test_hostile_admin import LOAD_REPORT, TOPIC_STATS, table_counts

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([2**31, 2**63, -1, 0, 1e30, 1e308, 5e-324, 3.0, 3.5])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)

MUTATION = st.tuples(st.sampled_from(["replace", "delete", "add"]), st.integers(min_value=0), JSON, st.text(max_size=8))


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every member path of a JSON document (objects and arrays), in a stable order."""
    out = [prefix]
    if isinstance(value, dict):
        for k in value:
            out += _paths(value[k], (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(body: Any, mutations: list[tuple[str, int, Any, str]]) -> Any:
    for op, pick, value, key in mutations:
        paths = _paths(body)
        path = paths[pick % len(paths)]
        if not path:  # the whole document
            body = value if op == "replace" else body
            continue
        parent = body
        for p in path[:-1]:
            parent = parent[p]
        last = path[-1]
        if op == "replace":
            parent[last] = value
        elif op == "delete":
            del parent[last]
        elif isinstance(parent[last], dict):
            parent[last][key] = value
        elif isinstance(parent[last], list):
            parent[last].append(value)
        else:
            parent[last] = value
    return body


_run_ids = itertools.count()


def _fuzz(spark, sim, db_url, tmp_path, target, mutations) -> None:
    from pulsar_rebalance.pipeline import stages

    sim.clear_faults()
    kind, broker = target
    if kind == "owned":
        path = f"/admin/v2/brokers/{sim.state.cluster}/{sim.broker_ids[broker]}/ownedNamespaces"
    else:
        path = LOAD_REPORT if kind == "load-report" else TOPIC_STATS
    sim.inject_answer(path, lambda body: _mutate(body, mutations), broker=broker)
    run_id = f"fuzz-{next(_run_ids)}"
    ctx = JobContext(run_id, str(tmp_path / "work"))
    before = table_counts(db_url)
    engine = make_engine(db_url)
    try:
        stages.stage_collect(
            spark,
            ctx,
            params_doc={},
            engine=engine,
            client=PulsarAdminClient.from_url(sim.admin_url, retries=0, timeout=10),
        )
    except RebalanceError as exc:
        event(f"rejected: {type(exc).__name__}")
        assert str(exc), "an error must say what is wrong"
        assert table_counts(db_url) == before, f"rejected ({exc}) but rows were written"
        assert not os.path.exists(ctx.work_dir), f"rejected ({exc}) but Parquet was written"
        return
    finally:
        engine.dispose()
    event("accepted")
    after = table_counts(db_url)
    assert after["runs"] == before["runs"] + 1
    assert after["broker_load"] == before["broker_load"] + len(sim.broker_ids)
    assert os.path.isdir(ctx.path("topics.parquet")) and os.path.isdir(ctx.path("bundle_stats.parquet"))


TARGETS = st.tuples(st.sampled_from(["load-report", "topic-stats", "owned"]), st.integers(min_value=0, max_value=4))


@pytest.fixture
def sim():
    with SimulatedPulsar(generate_cluster(seed=7), ephemeral=True) as s:
        yield s


_SETTINGS = dict(
    deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@settings(max_examples=25, derandomize=True, **_SETTINGS)
@given(target=TARGETS, mutations=st.lists(MUTATION, min_size=1, max_size=3))
def test_collect_commits_a_whole_snapshot_or_nothing(spark, sim, db_url, tmp_path, target, mutations):
    _fuzz(spark, sim, db_url, tmp_path, target, mutations)


@pytest.mark.slow
@settings(max_examples=150, **_SETTINGS)
@given(target=TARGETS, mutations=st.lists(MUTATION, min_size=1, max_size=3))
def test_collect_commits_a_whole_snapshot_or_nothing_many(spark, sim, db_url, tmp_path, target, mutations):
    _fuzz(spark, sim, db_url, tmp_path, target, mutations)
