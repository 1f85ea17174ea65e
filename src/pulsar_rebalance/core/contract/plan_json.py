"""Reading a plan's JSON and row forms into :mod:`core.plan`'s types (which parse nothing themselves).

``predicted`` (``plan_actions.predicted``) is read by :func:`prediction_from_json`, a stored or planned
action row by :func:`action_from_mapping`. The types still check every value on construction; these
readers check the shape (an object, known keys, one kind's fields) and name the key a problem is at
(``predicted.source.after``, ``boundaries[0]``). A value is passed on unchecked when the type's own
``__post_init__`` validates it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulsar_rebalance.core.plan import (
    ACTION_KINDS,
    ACTION_ROW_FIELDS,
    RANGE_NAME,
    Action,
    InvalidPlanError,
    Prediction,
    SplitAction,
    UnloadAction,
    UsageChange,
    frozen_json,
)


def _member(doc: Mapping[str, Any], key: str) -> Any:
    """``doc[key]`` (None when absent), unchecked: the dataclass it is passed to validates it in ``__post_init__``."""
    return doc.get(key)


def usage_change_from_json(doc: Any) -> UsageChange:
    """``{broker, before, after}``."""
    if not isinstance(doc, Mapping):
        raise InvalidPlanError("", doc, "must be an object {broker, before, after}")
    return UsageChange(broker=_member(doc, "broker"), before=_member(doc, "before"), after=_member(doc, "after"))


def prediction_from_json(doc: Any) -> Prediction:
    """Read the JSON form of a :class:`~pulsar_rebalance.core.plan.Prediction`. Errors name the field below
    the prediction (``source.before``)."""
    if not isinstance(doc, Mapping):
        raise InvalidPlanError("", doc, "must be a JSON object")
    try:  # the whole document is JSON (finite numbers, string keys) before its parts are read
        frozen_json("", doc)
    except InvalidPlanError as exc:
        where = f" at {exc.field}" if exc.field else ""
        problem = exc.problem.replace("is not JSON", f"is not JSON{where}", 1)
        raise InvalidPlanError("", exc.value, problem) from None
    typed = {}
    for key in ("source", "destination"):
        if doc.get(key) is not None:
            try:
                typed[key] = usage_change_from_json(doc[key])
            except InvalidPlanError as exc:
                raise exc.within(key) from None
    return Prediction(
        bundle_load=doc.get("bundleLoad"),
        **typed,
        details={k: v for k, v in doc.items() if k not in ("bundleLoad", "source", "destination")},
    )


def action_from_mapping(doc: Mapping[str, Any], *, default_seq: int | None = None) -> Action:
    """An action from its row form: ``kind``, ``namespace`` + ``bundle_range`` (or ``bundle``),
    ``source_broker``, ``reason``; unload: ``destination_broker``; split: ``boundaries`` and
    ``split_algorithm``; optional ``predicted`` (JSON) and ``seq`` (default ``default_seq``).

    Keys of the other kind may be present as None (a stored row has every column). Errors name the
    key (``boundaries[0]``, ``predicted.source.after``).
    """
    if not isinstance(doc, Mapping):
        raise InvalidPlanError("", doc, "an action must be a mapping")
    unknown = sorted(set(doc) - {*ACTION_ROW_FIELDS, "bundle"})
    if unknown:
        known = ", ".join(sorted({*ACTION_ROW_FIELDS, "bundle"}))
        raise InvalidPlanError(unknown[0], doc[unknown[0]], f"unknown key (known: {known})")
    kind = doc.get("kind")
    if kind not in ACTION_KINDS:
        raise InvalidPlanError("kind", kind, f"must be one of {', '.join(ACTION_KINDS)}")
    namespace, bundle_range = doc.get("namespace"), doc.get("bundle_range")
    if doc.get("bundle") is not None:
        bundle = doc["bundle"]
        ns, sep, rng = bundle.rpartition("/") if isinstance(bundle, str) else ("", "", "")
        if not sep or not ns or not RANGE_NAME.fullmatch(rng):
            raise InvalidPlanError(
                "bundle", bundle, "must be a bundle name like tenant/namespace/0x00000000_0xffffffff"
            )
        if (namespace, bundle_range) not in ((None, None), (ns, rng)):
            raise InvalidPlanError(
                "bundle", bundle, f"does not match namespace {namespace!r} / bundle_range {bundle_range!r}"
            )
        namespace, bundle_range = ns, rng
    predicted = doc.get("predicted")
    if predicted is not None:
        try:
            predicted = prediction_from_json(predicted)
        except InvalidPlanError as exc:
            raise exc.within("predicted") from None
    common = {
        "seq": doc.get("seq", default_seq),
        "namespace": namespace,
        "bundle_range": bundle_range,
        "source_broker": doc.get("source_broker"),
        "reason": doc.get("reason"),
        "predicted": predicted,
    }
    if kind == "unload":
        for key in ("boundaries", "split_algorithm"):
            if doc.get(key) is not None:
                raise InvalidPlanError(key, doc[key], "only a split action has it")
        return UnloadAction(**common, destination_broker=doc.get("destination_broker"))
    if doc.get("destination_broker") is not None:
        raise InvalidPlanError("destination_broker", doc["destination_broker"], "a split action has no destination")
    return SplitAction(**common, boundaries=_member(doc, "boundaries"), split_algorithm=doc.get("split_algorithm"))


__all__ = ["action_from_mapping", "prediction_from_json", "usage_change_from_json"]
