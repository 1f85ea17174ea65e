"""The planner's structure (Cruise Control's shape): goals in priority order on the what-if model, and the
plan's unloads as the diff of the model's assignment before and after the search."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from pulsar_rebalance.core.contract.load_json import (
    bundle_data_from_json,
    local_broker_data_from_json,
    namespace_bundle_stats_from_json,
)
from pulsar_rebalance.core.planner import PlannerInput, PlannerSettings
from pulsar_rebalance.core.planner.goals import (
    BAND_GOALS,
    Capacity,
    CloseTheGap,
    Descent,
    Levels,
    LowerThePair,
    MostGapPerMove,
    MoveWhole,
    SplitToFit,
    optimize,
)
from pulsar_rebalance.core.planner.load_model import ClusterView
from pulsar_rebalance.core.planner.proposals import Proposals, Rationale
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.load import BundleData
from pulsar_rebalance.simulator.scenarios import build

pytestmark = pytest.mark.timeout(120)


def _why(src: str, dst: str, *, fill: bool = False) -> Rationale:
    return Rationale(src, dst, f"Overloaded: {src} -> {dst}", "least used", {"sourceBefore": 0.9}, fill)


def test_the_unloads_are_the_diff_of_the_assignments_in_the_order_the_goals_moved_them() -> None:
    p = Proposals({"ns/0x0_0x8": "b1", "ns/0x8_0xf": "b1", "ns2/all": "b2"})
    p.moved("ns/0x8_0xf", _why("b1", "b3"))
    p.split("ns/0x0_0x8", "b1", ["ns/0x0_0x4", "ns/0x4_0x8"])
    p.moved("ns/0x4_0x8", _why("b1", "b2", fill=True))
    final = {"ns/0x0_0x4": "b1", "ns/0x4_0x8": "b2", "ns/0x8_0xf": "b3", "ns2/all": "b2"}
    unloads = p.diff(final.items())
    assert [(u.bundle, u.broker, u.destination) for u in unloads] == [
        ("ns/0x8_0xf", "b1", "b3"),
        ("ns/0x4_0x8", "b1", "b2"),  # a split's child starts on its parent's broker
    ]
    assert unloads[0].predicted == {"sourceBefore": 0.9} and unloads[0].destination_reason == "least used"
    assert p.fills() == ["ns/0x4_0x8"]


def test_a_move_and_its_rationale_must_agree_or_the_plan_is_refused() -> None:
    p = Proposals({"a": "b1", "b": "b1"})
    with pytest.raises(ValueError, match="no rationale"):
        p.diff({"a": "b2", "b": "b1"}.items())  # the model moved a bundle no goal explained
    p.moved("a", _why("b1", "b2"))
    with pytest.raises(ValueError, match="does not show"):
        p.diff({"a": "b1", "b": "b1"}.items())  # a rationale for a move the model does not show
    with pytest.raises(ValueError, match="rationale says b1 -> b2"):
        p.diff({"a": "b3", "b": "b1"}.items())
    with pytest.raises(ValueError, match="moved twice"):
        p.moved("a", _why("b2", "b3"))


def test_a_rollback_forgets_the_moves_made_after_its_checkpoint() -> None:
    p = Proposals({"a": "b1", "b": "b1"})
    p.moved("a", _why("b1", "b2"))
    point = p.checkpoint()
    p.moved("b", _why("b1", "b3", fill=True))
    p.rollback(point)
    assert p.count() == 1 and p.fills() == []
    assert [u.bundle for u in p.diff({"a": "b2", "b": "b1"}.items())] == ["a"]


def _descent(name: str, load_model: Any = None, **levels: float) -> Descent:
    """A search on a scenario's cluster as one load report shows it (``levels``: band levels overridden)."""
    model = (build(name, 1) if load_model is None else build(name, 1, load_model=load_model)).model
    stats = model.bundle_stats()
    reports = model.load_reports(stats)
    brokers = {b: local_broker_data_from_json(r, b) for b, r in reports.items()}
    bundle_data = {}
    for b, s in stats.items():
        bd = BundleData.new_default()
        bd.update(namespace_bundle_stats_from_json(s, b))
        bundle_data[b] = bundle_data_from_json(bd.to_json(), b)
    config = LoadBalancerConfig()
    st = PlannerSettings()
    view = ClusterView(brokers, bundle_data, config)
    eligible = sorted(view.brokers)
    band = dataclasses.replace(Levels.of(st, view.ideal(eligible), view.noise, config), **levels)
    before = {b: view.usage(b) for b in eligible}
    inp = PlannerInput(brokers, bundle_data, {}, model.now_ms)
    return Descent(st, view, inp, config, band, eligible, before, {}, set(), {}, [])


def _busiest(dx: Descent) -> Any:
    s = max(dx.eligible, key=lambda b: (dx.view.usage(b), b))
    return dx.source(s, None, dx.levels.target)


def _near_target() -> dict[str, float]:
    """A target just below the busiest broker: several of its bundles alone close the gap, smaller ones do not."""
    probe = _descent("one-hot-broker")
    return {"target": _busiest(probe).usage - 0.02}


def _first_move(goal: Any, **levels: float) -> tuple[str, str] | None:
    d = _descent("one-hot-broker", **levels)
    if not goal.act(d, _busiest(d)):
        return None
    (u,) = d.unloads()
    return u.bundle, u.destination


def test_each_band_goal_makes_the_move_it_is_named_for() -> None:
    near = _near_target()
    dx = _descent("one-hot-broker", **near)
    src = _busiest(dx)
    # what Capacity accepts for each candidate bundle: the goals only choose among these
    fits = {name: Capacity.best_destination(dx, src, name) for _, name, _ in src.cands}
    within = [(size, name) for size, name, _ in src.cands if fits[name] is not None and fits[name][0] <= src.cap]
    closing = [(size, name) for size, name in within if size >= src.excess]
    assert closing and len(within) > len(closing)  # the scenario tells the goals apart
    # CloseTheGap: the smallest bundle that alone brings the source to the target
    smallest = min(closing)[1]
    assert _first_move(CloseTheGap(), **near) == (smallest, fits[smallest][1])
    # MostGapPerMove: the largest bundle that fits
    assert _first_move(MostGapPerMove(), **near)[0] == max(within)[1]
    assert max(within)[1] != smallest
    # LowerThePair: the move that lowers max(source, destination) the most
    pair = min((max(a, fits[n][0]), n) for _, n, a in src.cands if fits[n] is not None)
    assert _first_move(LowerThePair(), **near)[0] == pair[1]
    # with the real target no bundle alone closes the gap: CloseTheGap declines, and SplitToFit splits
    # nothing while the biggest bundle fits somewhere
    assert _first_move(CloseTheGap()) is None
    d = _descent("one-hot-broker")
    assert not SplitToFit().act(d, _busiest(d)) and d.splits == []


def test_the_search_tries_the_goals_in_priority_order() -> None:
    assert [type(g) for g in BAND_GOALS] == [CloseTheGap, SplitToFit, MoveWhole, MostGapPerMove, LowerThePair]
    for levels, first in (
        (_near_target(), CloseTheGap()),  # a bundle closes the gap: the first goal acts
        ({}, MostGapPerMove()),  # none does: the first three decline, the fourth acts
    ):
        dx = _descent("one-hot-broker", **levels)
        src = _busiest(dx)
        optimize(dx, {src.broker}, None)
        unloads = dx.unloads()
        assert unloads and (unloads[0].bundle, unloads[0].destination) == _first_move(first, **levels)
        # the search leaves the source within the target and no destination above it
        assert dx.view.usage(src.broker) <= dx.levels.target + dx.levels.min_gain
        assert all(dx.view.usage(u.destination) <= dx.levels.target for u in unloads if u.destination)


def test_a_broker_above_the_overload_threshold_splits_a_bundle_that_fits_nowhere_even_below_its_excess() -> None:
    # random-543 (a queueing curve, hidden speeds): the hot bundle is its broker's only one, and what the broker
    # reports beyond it (idle CPU, queueing) makes the excess larger than the bundle. Moved whole it fits nowhere;
    # below the overload threshold the goals after SplitToFit would move it whole, above it only a split lowers it
    from pulsar_rebalance.simulator.random_models import random_model

    dx = _descent("hot-bundle-needs-split", random_model("random-543"))
    src = _busiest(dx)
    assert src.biggest is not None and dx.view.owned[src.broker] == [src.biggest[1]]
    assert src.usage > dx.levels.overload and src.biggest[0] < src.excess
    assert all(
        dx.view.landing(d, dx.view.arrival(dx.view.bundles[src.biggest[1]].vec, src.broker, d)) > src.cap
        for d in src.dests
    )  # it fits within the target nowhere whole
    assert SplitToFit().act(dx, src)
    [split] = dx.splits
    assert split.bundle == src.biggest[1] and len(split.children or ()) >= 2
    # the search goes on to move its parts: the broker comes down, no destination above the target
    dx = _descent("hot-bundle-needs-split", random_model("random-543"))
    optimize(dx, {src.broker}, None)
    moved = dx.unloads()
    assert dx.splits and moved and all(u.broker == src.broker for u in moved)
    assert dx.view.usage(src.broker) < src.usage - 1.0
    assert all(dx.view.usage(u.destination) <= dx.levels.target for u in moved if u.destination)
    # the same broker below the threshold (the threshold raised above it): the bundle is left to the moves
    below = _descent("hot-bundle-needs-split", random_model("random-543"), overload=src.usage + 1.0)
    assert not SplitToFit().act(below, _busiest(below)) and below.splits == []


@pytest.mark.parametrize(
    ("load_model", "levels", "outcome"),
    [(None, {}, "stays"), ("random-112", {}, "whole"), ("random-112", {"min_gain": 0.3}, "room")],
)
def test_a_bundle_nothing_can_split_moves_whole_only_where_it_lands_below_its_source_with_it_alone(
    load_model: str | None, levels: dict[str, float], outcome: str
) -> None:
    # MoveWhole: on equal brokers a hot topic lands on any other broker on top of that broker's load, higher than
    # its own broker with the topic alone (isolating it is better); on random-112's x1.5 brokers under a convex
    # CPU it costs less elsewhere, and one move beats the many that would isolate it - by the minimum gain.
    # Where the gain is too small for that one move but the source stays above the overload threshold even with
    # the bundle alone, MakeRoom empties the broker where it lands lowest alone and moves it there.
    from pulsar_rebalance.simulator.random_models import random_model

    dx = _descent("hot-single-topic-unsplittable", None if load_model is None else random_model(load_model), **levels)
    src = _busiest(dx)
    assert src.biggest is not None
    big = src.biggest[1]
    assert not MoveWhole().act(dx, src)  # not known to be unsplittable: SplitToFit tries first
    dx.unsplittable.add(big)
    view = dx.view
    alone = view.usage_without(src.broker, [n for n in view.owned[src.broker] if n != big])
    lowest = min(view.landing(d, view.arrival(view.bundles[big].vec, src.broker, d)) for d in src.dests)
    assert lowest > src.cap  # it fits within the target nowhere
    assert (lowest < alone - dx.levels.min_gain) is (outcome == "whole"), (lowest, alone)
    assert (alone > dx.levels.overload) is (outcome != "stays"), alone
    owned_before = {b: list(ns) for b, ns in view.owned.items()}
    assert MoveWhole().act(dx, src) is (outcome != "stays")
    unloads = dx.unloads()
    if outcome == "stays":
        assert unloads == []
    elif outcome == "whole":
        [u] = unloads
        assert u.bundle == big and u.predicted["destinationAfter"] == pytest.approx(lowest, abs=1e-4)
        assert "moved whole to where it lands lowest" in u.reason
    else:
        *cleared, last = unloads
        emptied = last.destination
        assert last.bundle == big and "emptied for it in this plan" in last.reason
        assert {u.bundle for u in cleared} == set(owned_before[emptied])  # every bundle it had, and only those
        assert all(u.destination not in (emptied, src.broker) for u in cleared)
        assert all(u.predicted["destinationAfter"] <= dx.levels.target + 1e-9 for u in cleared)
        landed = last.predicted["destinationAfter"]
        assert landed <= dx.levels.overload and landed < alone - dx.levels.min_gain, (landed, alone)


def test_a_hard_goal_refusal_leaves_the_source_stuck_with_a_warning_not_a_bad_move() -> None:
    probe = _descent("one-hot-broker")
    src = _busiest(probe)
    quietest = min(probe.view.usage(b) for b in probe.eligible if b != src.broker)
    # Pulsar's overload threshold at the least-used destination's usage: Capacity accepts no destination
    dx = _descent("one-hot-broker", overload=quietest)
    assert Capacity.best_destination(dx, _busiest(dx), src.cands[-1][1]) is None
    optimize(dx, {src.broker}, None)
    assert dx.unloads() == [] and dx.splits == [] and src.broker in dx.stuck
    assert any(w.startswith(f"{src.broker}: predicted usage") for w in dx.warnings)
    # the same search with the real threshold moves load off it
    ok = _descent("one-hot-broker")
    optimize(ok, {src.broker}, None)
    assert ok.unloads()
