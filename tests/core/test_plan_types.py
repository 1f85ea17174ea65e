"""The typed plan (core/plan.py): validation on construction, immutability, the action state machine
and the content hash that stored plans are verified by before they execute."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from pulsar_rebalance.core.contract.plan_json import action_from_mapping, prediction_from_json
from pulsar_rebalance.core.plan import (
    ACTION_STATES,
    ALLOWED_TRANSITIONS,
    FINAL_ACTION_STATES,
    InvalidPlanError,
    Plan,
    Prediction,
    SplitAction,
    UnloadAction,
    UsageChange,
    check_transition,
    content_hash,
)
from pulsar_rebalance.errors import InvalidTransitionError

NS = "public/default"


def split(**over) -> SplitAction:
    fields = dict(
        seq=0,
        namespace=NS,
        bundle_range="0x00000000_0x40000000",
        source_broker="b1:8080",
        boundaries=(0x20000000,),
        split_algorithm="range_equally_divide",
        reason="hot",
    )
    return SplitAction(**{**fields, **over})


def unload(**over) -> UnloadAction:
    fields = dict(
        seq=1,
        namespace=NS,
        bundle_range="0x20000000_0x40000000",
        source_broker="b1:8080",
        destination_broker="b2:8080",
        reason="overloaded",
    )
    return UnloadAction(**{**fields, **over})


# --------------------------------------------------------------------------------------- content hash

# Rows exactly as `plan_actions` stores them (and as planning made them before the typed plan existed).
STORED_ROWS = [
    {
        "seq": 0,
        "kind": "split",
        "namespace": NS,
        "bundle_range": "0x00000000_0x40000000",
        "source_broker": "b1:8080",
        "destination_broker": None,
        "boundaries": [0x20000000],
        "split_algorithm": "range_equally_divide",
        "reason": "hot",
        "predicted": {"children": ["0x00000000_0x20000000", "0x20000000_0x40000000"]},
    },
    {
        "seq": 1,
        "kind": "unload",
        "namespace": NS,
        "bundle_range": "0x20000000_0x40000000",
        "source_broker": "b1:8080",
        "destination_broker": "b2:8080",
        "boundaries": None,
        "split_algorithm": None,
        "reason": "overloaded",
        "predicted": None,
    },
]
RUN = "scheduled__2026-11-23T10:00:00+00:00"
# Computed by store/repository.plan_content_hash before core/plan.py existed (commit 7f89acc): plans
# stored since then carry these hashes, and execution refuses a plan whose actions hash otherwise.
KNOWN_HASH = "976542e3594b4a11187e5af4534cab1d729bb967c2fd4c6992bf3e906bc8c9d0"
KNOWN_HASH_DRY_RUN_UNLOAD_ONLY = "3a1f254e17de1228213404ecf8060b29df819921eface63fa6c2d2f66e1f18ed"


def test_a_known_plan_hashes_byte_for_byte_as_stored_plans_do():
    typed = tuple(action_from_mapping(row) for row in STORED_ROWS)
    plan = Plan(cluster="c1", run_id=RUN, dry_run=False, actions=typed)
    assert plan.content_hash() == KNOWN_HASH
    assert plan.content_hash_input() == (
        '{"actions":[{"boundaries":[536870912],"bundle_range":"0x00000000_0x40000000","destination_broker":null,'
        '"kind":"split","namespace":"public/default","seq":0,"source_broker":"b1:8080"},'
        '{"boundaries":null,"bundle_range":"0x20000000_0x40000000","destination_broker":"b2:8080","kind":"unload",'
        '"namespace":"public/default","seq":1,"source_broker":"b1:8080"}],'
        '"dry_run":false,"run_id":"scheduled__2026-11-23T10:00:00+00:00"}'
    )
    only_unload = Plan(cluster="c1", run_id="run-1", dry_run=True, actions=typed[1:])
    assert only_unload.content_hash() == KNOWN_HASH_DRY_RUN_UNLOAD_ONLY


def test_the_hash_is_the_same_for_typed_actions_and_stored_rows_and_ignores_reasons_and_predictions():
    typed = [action_from_mapping(row) for row in STORED_ROWS]
    assert content_hash(run_id=RUN, dry_run=False, actions=STORED_ROWS) == KNOWN_HASH
    assert content_hash(run_id=RUN, dry_run=False, actions=reversed(typed)) == KNOWN_HASH  # by seq, not list order
    explained = [
        dataclasses.replace(a, reason="another reason", predicted=Prediction(bundle_load={"topics": 3})) for a in typed
    ]
    assert content_hash(run_id=RUN, dry_run=False, actions=explained) == KNOWN_HASH


@pytest.mark.parametrize(
    "change",
    [
        {"run_id": "another-run"},
        {"dry_run": True},
        {"actions": (split(), unload(destination_broker="b3:8080"))},
        {"actions": (split(boundaries=(0x10000000,)), unload(bundle_range="0x10000000_0x40000000"))},
        {"actions": (split(), unload(seq=2))},
    ],
)
def test_anything_that_changes_what_runs_changes_the_hash(change):
    base = dict(cluster="c1", run_id=RUN, dry_run=False, actions=(split(), unload()))
    assert Plan(**base).content_hash() == KNOWN_HASH
    assert Plan(**{**base, **change}).content_hash() != KNOWN_HASH


def test_the_row_form_round_trips():
    for row in STORED_ROWS:
        assert action_from_mapping(row).to_row() == row
    planned = {
        "tied": ["b2:8080", "b3:8080"],
        "bundleLoad": {"msgRateIn": 300.0, "topics": 4},
        "source": {"broker": "b1:8080", "before": 0.9, "after": 0.6},
        "destination": {"broker": "b2:8080", "before": 0.1, "after": 0.4},
    }
    row = {**STORED_ROWS[1], "predicted": planned}
    action = action_from_mapping(row)
    assert action.predicted.source == UsageChange(broker="b1:8080", before=0.9, after=0.6)
    assert action.predicted.bundle_load["msgRateIn"] == 300.0
    assert action.to_row() == row


# ----------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("build", "field", "value"),
    [
        (lambda: split(seq=-1), "seq", -1),
        (lambda: split(seq=True), "seq", True),
        (lambda: split(namespace=" "), "namespace", " "),
        (lambda: split(bundle_range="0x40000000_0x00000000"), "bundle_range", "0x40000000_0x00000000"),
        (lambda: split(bundle_range="0X00000000_0x40000000"), "bundle_range", "0X00000000_0x40000000"),
        (lambda: split(source_broker=""), "source_broker", ""),
        (lambda: split(reason=None), "reason", None),
        (lambda: split(boundaries=()), "boundaries", ()),
        (lambda: split(boundaries=None), "boundaries", None),
        (lambda: split(boundaries=(0x20000000, 0x10000000)), "boundaries[1]", 0x10000000),
        (lambda: split(boundaries=(0x00000000,)), "boundaries[0]", 0),
        (lambda: split(boundaries=(0x40000000,)), "boundaries[0]", 0x40000000),
        (lambda: split(boundaries=("0x20000000",)), "boundaries[0]", "0x20000000"),
        (lambda: split(split_algorithm=""), "split_algorithm", ""),
        (lambda: unload(destination_broker="b1:8080"), "destination_broker", "b1:8080"),
        (lambda: unload(destination_broker=""), "destination_broker", ""),
        (lambda: unload(predicted={"source": {}}), "predicted", {"source": {}}),
        (
            lambda: unload(predicted=Prediction(source=UsageChange(broker="b9:8080", before=0.5, after=0.2))),
            "predicted.source.broker",
            "b9:8080",
        ),
        (lambda: UsageChange(broker="b1:8080", before=float("nan"), after=0.1), "before", float("nan")),
        (lambda: UsageChange(broker="b1:8080", before=0.5, after=-0.1), "after", -0.1),
        (lambda: Prediction(bundle_load={"msgRateIn": float("inf")}), "bundleLoad.msgRateIn", float("inf")),
        (lambda: Prediction(details={"tied": {1, 2}}), "details.tied", {1, 2}),
        (lambda: Prediction(details={"source": 1}), "details.source", 1),
    ],
)
def test_construction_errors_name_the_field_and_the_value(build, field, value):
    with pytest.raises(InvalidPlanError) as info:
        build()
    err = info.value
    assert err.field == field
    assert err.value == value or (value != value and err.value != err.value)  # NaN is not equal to itself
    assert str(err).startswith(f"{field}: ") and repr(value) in str(err)


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"kind": "move"}, "kind"),
        ({"colour": "red"}, "colour"),
        ({"bundle": "public/default"}, "bundle"),
        ({"bundle": f"{NS}/0x00000000_0x40000000", "bundle_range": "0x40000000_0x80000000"}, "bundle"),
        ({"boundaries": [5]}, "boundaries"),
        ({"split_algorithm": "range_equally_divide"}, "split_algorithm"),
        ({"seq": None}, "seq"),
        ({"predicted": {"x": float("nan")}}, "predicted"),
        ({"predicted": {"source": {"broker": "b1:8080", "before": "high", "after": 0.1}}}, "predicted.source.before"),
        ({"predicted": [1]}, "predicted"),
    ],
)
def test_row_errors_name_the_key(row, field):
    base = {
        "kind": "unload",
        "namespace": NS,
        "bundle_range": "0x00000000_0x40000000",
        "source_broker": "b1:8080",
        "destination_broker": "b2:8080",
        "reason": "r",
        "seq": 0,
    }
    with pytest.raises(InvalidPlanError) as info:
        action_from_mapping({**base, **row})
    assert info.value.field == field


def test_a_split_row_with_a_destination_is_refused():
    with pytest.raises(InvalidPlanError) as info:
        action_from_mapping({**STORED_ROWS[0], "destination_broker": "b2:8080"})
    assert info.value.field == "destination_broker"


def test_a_bundle_name_stands_for_namespace_and_range_and_seq_defaults():
    a = action_from_mapping(
        {
            "kind": "unload",
            "bundle": f"{NS}/0x00000000_0x40000000",
            "source_broker": "b1:8080",
            "destination_broker": None,
            "reason": "r",
        },
        default_seq=7,
    )
    assert (a.namespace, a.bundle_range, a.seq) == (NS, "0x00000000_0x40000000", 7)
    assert a.bundle == f"{NS}/0x00000000_0x40000000"
    assert (a.kind, a.destination_broker, a.boundaries, a.split_algorithm) == ("unload", None, None, None)


def test_a_split_names_its_children():
    s = split(bundle_range="0x00000000_0xffffffff", boundaries=(0x40000000, 0x40000001))
    assert s.children == ("0x00000000_0x40000000", "0x40000000_0x40000001", "0x40000001_0xffffffff")
    assert (s.kind, s.destination_broker, s.lower, s.upper) == ("split", None, 0, 0xFFFFFFFF)


@pytest.mark.parametrize(
    ("actions", "field", "problem"),
    [
        ((split(seq=1), unload(seq=1)), "actions[1].seq", "unique, in order"),
        ((unload(seq=2), split(seq=1)), "actions[1].seq", "unique, in order"),
        (
            (unload(seq=0), unload(seq=1, destination_broker="b3:8080")),
            "actions[1].bundle_range",
            "is already unloaded by actions[0]",
        ),
        ((split(seq=0), split(seq=1)), "actions[1].bundle_range", "is already split by actions[0]"),
        (
            (split(seq=0), unload(seq=1, bundle_range="0x00000000_0x40000000")),
            "actions[1].bundle_range",
            "unload one of its children instead",
        ),
        (({"kind": "unload"},), "actions[0]", "SplitAction or an UnloadAction"),
    ],
)
def test_a_plan_refuses_actions_that_cannot_all_run(actions, field, problem):
    with pytest.raises(InvalidPlanError) as info:
        Plan(cluster="c1", run_id=RUN, dry_run=False, actions=actions)
    assert info.value.field == field and problem in info.value.problem


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"cluster": ""}, "cluster"),
        ({"run_id": None}, "run_id"),
        ({"dry_run": "no"}, "dry_run"),
        ({"actions": None}, "actions"),
        ({"summary": ["not", "an", "object"]}, "summary"),
        ({"summary": {"maxUsageBefore": float("nan")}}, "summary.maxUsageBefore"),
        (
            {"summary": {"brokers": {"b1:8080": {"before": {"usage": 0.9}, "after": {}}}}},
            "summary.brokers[b1:8080].after.usage",
        ),
    ],
)
def test_a_plan_validates_its_own_fields(change, field):
    with pytest.raises(InvalidPlanError) as info:
        Plan(**{**dict(cluster="c1", run_id=RUN, dry_run=False, actions=()), **change})
    assert info.value.field == field


def test_a_plan_reads_the_predicted_usage_per_broker_from_its_summary():
    summary = {
        "maxUsageBefore": 0.9,
        "brokers": {
            "b1:8080": {"before": {"usage": 0.9, "cpu": 90.0}, "after": {"usage": 0.6}, "diff": -0.3},
            "b2:8080": {"before": {"usage": 0.1}, "after": {"usage": 0.4}, "diff": 0.3},
        },
    }
    plan = Plan(cluster="c1", run_id=RUN, dry_run=False, actions=(split(), unload()), summary=summary)
    assert plan.predicted["b1:8080"] == UsageChange(broker="b1:8080", before=0.9, after=0.6)
    assert plan.splits == (split(),) and plan.unloads == (unload(),) and not plan.empty
    assert Plan(cluster="c1", run_id=RUN, dry_run=False, actions=[]).predicted == {}


# --------------------------------------------------------------------------------------- immutability


def test_every_type_is_frozen_down_to_its_json():
    a = action_from_mapping({**STORED_ROWS[1], "predicted": {"tied": ["b2:8080"], "bundleLoad": {"topics": 4}}})
    plan = Plan(cluster="c1", run_id=RUN, dry_run=False, actions=[split(), a], summary={"notes": ["n"]})
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.destination_broker = "b3:8080"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.actions = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        a.predicted.bundle_load["topics"] = 5  # type: ignore[index]
    with pytest.raises(TypeError):
        a.predicted.details["tied"] = []  # type: ignore[index]
    with pytest.raises(AttributeError):
        a.predicted.details["tied"].append("b9:8080")  # a tuple
    with pytest.raises(TypeError):
        plan.summary["notes"] = []  # type: ignore[index]
    assert isinstance(plan.actions, tuple) and split(boundaries=[0x20000000]).boundaries == (0x20000000,)
    assert hash(plan) == hash(Plan(cluster="c1", run_id=RUN, dry_run=False, actions=(split(), a)))


def test_the_json_a_type_was_built_from_can_change_without_changing_it():
    doc = {"tied": ["b2:8080"], "bundleLoad": {"topics": 4}}
    prediction = prediction_from_json(doc)
    doc["tied"].append("b9:8080")
    doc["bundleLoad"]["topics"] = 99
    assert prediction.to_json() == {"tied": ["b2:8080"], "bundleLoad": {"topics": 4}}


# -------------------------------------------------------------------------------------- state machine


def test_the_transition_table():
    assert ALLOWED_TRANSITIONS == {
        "pending": {"in_progress", "skipped"},
        "in_progress": {"completed", "failed", "skipped"},
        "failed": {"in_progress"},
        "completed": set(),
        "skipped": set(),
    }
    assert set(ALLOWED_TRANSITIONS) == set(ACTION_STATES)
    assert FINAL_ACTION_STATES == {"completed", "skipped"}
    with pytest.raises(TypeError):
        ALLOWED_TRANSITIONS["completed"] = frozenset({"pending"})  # type: ignore[index]


@pytest.mark.parametrize(("current", "to"), list(itertools.product(ACTION_STATES, ACTION_STATES)))
def test_every_pair_of_states_is_checked_against_the_table(current, to):
    error = "why" if to in ("failed", "skipped") else None
    if to in ALLOWED_TRANSITIONS[current]:
        check_transition(current, to, error=error)
    else:
        with pytest.raises(InvalidTransitionError, match=f"cannot go from {current} to {to}"):
            check_transition(current, to, error=error)


@pytest.mark.parametrize(
    ("current", "to", "error", "message"),
    [
        ("in_progress", "failed", None, "moving to failed needs an error/reason"),
        ("pending", "skipped", "  ", "moving to skipped needs an error/reason"),
        ("pending", "in_progress", "oops", "error must be None when moving to in_progress"),
        ("in_progress", "completed", "oops", "error must be None when moving to completed"),
        ("pending", "done", None, "unknown state 'done'"),
        ("lost", "pending", None, "unknown current state 'lost'"),
        ("completed", "in_progress", None, r"allowed: nothing \(final\)"),
    ],
)
def test_a_transition_needs_an_error_exactly_when_it_fails_or_skips(current, to, error, message):
    with pytest.raises(InvalidTransitionError, match=message) as info:
        check_transition(current, to, error=error, label="action 7 (unload t/n/0x0_0x1)")
    assert str(info.value).startswith("action 7 (unload t/n/0x0_0x1): ")
