"""Strict JSON text parsing for the decision core's contracts: one clear error, never a traceback.

Python's :func:`json.loads` is lenient where a contract must not be, and fails in ways a CLI must
not show:

* a key given twice in one object (``{"b1": {...}, "b1": {...}}``) silently keeps the last one:
  here it is an error naming the key and the JSON path of its object (``cycles[0].brokers``);
* ``NaN``, ``Infinity`` and ``-Infinity`` literals are accepted (Pulsar never emits them): rejected;
* a number too large for a double (``1e400``) silently becomes ``inf``: rejected, naming the literal;
* nesting deeper than the interpreter's recursion limit raises ``RecursionError``: reported;
* an integer literal longer than Python's digit limit raises a bare ``ValueError``: reported.

Every failure is a :class:`~pulsar_rebalance.errors.ScenarioError` whose field is the source label
(``<stdin>`` or the file name) or, for a repeated key, the JSON path of the object. Pure: no I/O.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pulsar_rebalance.core.contract.json_input import field_path
from pulsar_rebalance.errors import ScenarioError


class _Repeated(dict[str, Any]):
    """An object that gave a key more than once; ``key`` is the first repeated one."""

    __slots__ = ("key",)
    key: str


class _OutOfRange(Exception):
    def __init__(self, literal: str) -> None:
        super().__init__(literal)
        self.literal = literal


def _parse_float(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):
        raise _OutOfRange(literal)
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (Pulsar never sends non-finite numbers)")


def _repeated_key(pairs: list[tuple[str, Any]]) -> str:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    raise AssertionError("no repeated key")  # pragma: no cover - only called when there is one


def _find_repeated(root: Any) -> tuple[str, str]:
    """(JSON path of the object, repeated key) of the first object that repeated a key, in document order."""
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, _Repeated):
            return path or "$", value.key
        if isinstance(value, dict):
            children = [(v, field_path(path, k)) for k, v in value.items()]
        elif isinstance(value, list):
            children = [(v, field_path(path, i)) for i, v in enumerate(value)]
        else:
            continue
        stack.extend(reversed(children))
    raise AssertionError("no object repeated a key")  # pragma: no cover


def loads_strict(text: str, label: str) -> Any:
    """Parse ``text`` as strict JSON; ``label`` names the source in errors (``<stdin>``, a path).

    Raises:
        ScenarioError: invalid JSON (with line and column), a repeated key (naming it and its
            object's path), a non-finite or out-of-range number, or nesting too deep to parse.
    """
    repeated = False

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal repeated
        obj = dict(pairs)
        if len(obj) == len(pairs):
            return obj
        repeated = True
        marked = _Repeated(obj)
        marked.key = _repeated_key(pairs)
        return marked

    try:
        doc = json.loads(text, object_pairs_hook=pairs_hook, parse_float=_parse_float, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ScenarioError(label, f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
    except _OutOfRange as exc:
        raise ScenarioError(
            label, f"number {exc.literal} is out of the range of a double (Java's and JSON's)"
        ) from None
    except RecursionError:
        raise ScenarioError(
            label, "JSON nests too deeply to be a scenario (arrays/objects inside each other)"
        ) from None
    except ValueError as exc:  # NaN / Infinity literals, integer literals beyond Python's digit limit
        raise ScenarioError(label, f"invalid JSON: {exc}") from None
    if repeated:
        path, key = _find_repeated(doc)
        raise ScenarioError(path, f"key {key!r} is given twice in this object (JSON object keys must be unique)")
    return doc


def _first_non_finite(root: Any) -> str:
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return path or "$"
        if isinstance(value, dict):
            stack.extend(reversed([(v, field_path(path, str(k))) for k, v in value.items()]))
        elif isinstance(value, (list, tuple)):
            stack.extend(reversed([(v, field_path(path, i)) for i, v in enumerate(value)]))
    return "$"


def dumps_finite(result: Any, *, indent: int | None = None) -> str:
    """Serialise a contract's result; a non-finite number in it is an input problem, not a crash.

    Inputs are finite, but Pulsar's arithmetic on extreme ones can overflow (a usage of 1e308 summed
    with another). JSON cannot carry the overflowed value, so the document is refused, naming the
    result field that overflowed.

    Raises:
        ScenarioError: the result holds NaN or an infinity.
    """
    try:
        return json.dumps(result, indent=indent, allow_nan=False)
    except ValueError:
        field = _first_non_finite(result)
        raise ScenarioError(
            "$", f"the input's numbers are too large: computing result field {field} overflows a double"
        ) from None
