"""Small readers for JSON input that name the offending field when it is wrong.

Every decision-core JSON contract (``decide``, ``split``, ``bundles``) reads its input through these
helpers so that an invalid document fails with a :class:`~pulsar_rebalance.errors.ScenarioError`
whose ``field`` is a JSON path such as ``brokers.b1.cpu.usage`` or ``boundaries[2]``.

Conventions:

* ``path`` is the path of the *parent* object (``""`` at the root); ``key`` is the member read.
  The full field path is only built when an error is raised, so the happy path stays cheap: the
  ``decide`` benchmark parses ~100,000 bundle entries through these functions.
* Numbers: JSON ``true``/``false`` are never numbers; NaN and +/-infinity are rejected (Python's
  ``json`` module accepts the non-standard ``NaN``/``Infinity`` literals, Pulsar never emits them);
  negative values are rejected unless ``allow_negative=True`` (rates, throughputs and counts are
  never negative in Pulsar's data).
* Integers: an integral float such as ``3.0`` is accepted (Jackson does the same), ``3.5`` is not.
  Numbers must fit a double (an integer literal such as ``1`` followed by 400 zeros is not a double);
  Java's int/long ranges of load-report counters are checked by ``core.snapshot``.
* Optional readers return ``default`` only when the member is *absent*; an explicit ``null`` is an
  error unless ``allow_null=True`` - a present-but-null value is usually a bug in the producer.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pulsar_rebalance.errors import ScenarioError

T = TypeVar("T")

_MISSING: Any = object()

_DOUBLE_MAX = sys.float_info.max


def field_path(path: str, key: str | int) -> str:
    """Join a parent path and a member: ``a.b`` for strings, ``a[3]`` for list indices."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if not key or not key.isprintable() or key != key.strip():
        # an empty, blank or control-character member name must still be visible in one message line
        return f"{path}[{json.dumps(key)}]"
    return f"{path}.{key}" if path else key


def json_type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


def check_number(value: object, field: str, *, allow_negative: bool = False) -> float:
    """Validate an already-extracted JSON value as a finite number; ``field`` is its full path."""
    if type(value) is not float and type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ScenarioError(field, f"expected a number, got {json_type_name(value)}")
    if type(value) is int and not -_DOUBLE_MAX <= value <= _DOUBLE_MAX:
        raise ScenarioError(field, "number is out of the range of a double (Java's and JSON's)")
    if not math.isfinite(value):
        raise ScenarioError(field, f"expected a finite number, got {value!r}")
    if value < 0 and not allow_negative:
        raise ScenarioError(field, f"must not be negative, got {value!r}")
    return float(value)


def check_int(value: object, field: str, *, allow_negative: bool = False) -> int:
    """Validate an already-extracted JSON value as an integer (``3.0`` accepted, ``3.5`` not)."""
    if type(value) is int:
        result: int = value
    elif type(value) is float:
        if not math.isfinite(value) or not value.is_integer():
            raise ScenarioError(field, f"expected an integer, got {value!r}")
        result = int(value)
    else:
        raise ScenarioError(field, f"expected an integer, got {json_type_name(value)}")
    if result < 0 and not allow_negative:
        raise ScenarioError(field, f"must not be negative, got {result}")
    return result


def req_mapping(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    """The member ``key`` of ``obj``, which must be a JSON object."""
    value = obj.get(key, _MISSING)
    if value is _MISSING:
        raise ScenarioError(field_path(path, key), "required object is missing")
    if not isinstance(value, Mapping):
        raise ScenarioError(field_path(path, key), f"expected an object, got {json_type_name(value)}")
    return value


def opt_mapping(obj: Mapping[str, Any], key: str, path: str, default: T | None = None) -> Mapping[str, Any] | T | None:
    """Like :func:`req_mapping` but returns ``default`` when the member is absent."""
    if key not in obj:
        return default
    return req_mapping(obj, key, path)


def req_list(obj: Mapping[str, Any], key: str, path: str) -> Sequence[Any]:
    """The member ``key`` of ``obj``, which must be a JSON array."""
    value = obj.get(key, _MISSING)
    if value is _MISSING:
        raise ScenarioError(field_path(path, key), "required array is missing")
    if not isinstance(value, (list, tuple)):
        raise ScenarioError(field_path(path, key), f"expected an array, got {json_type_name(value)}")
    return value


def opt_list(obj: Mapping[str, Any], key: str, path: str, default: T | None = None) -> Sequence[Any] | T | None:
    """Like :func:`req_list` but returns ``default`` when the member is absent."""
    if key not in obj:
        return default
    return req_list(obj, key, path)


def req_str(obj: Mapping[str, Any], key: str, path: str, *, allow_empty: bool = False) -> str:
    """The member ``key`` of ``obj``, which must be a (by default non-empty) string."""
    value = obj.get(key, _MISSING)
    if value is _MISSING:
        raise ScenarioError(field_path(path, key), "required string is missing")
    if not isinstance(value, str):
        raise ScenarioError(field_path(path, key), f"expected a string, got {json_type_name(value)}")
    if not value and not allow_empty:
        raise ScenarioError(field_path(path, key), "must not be empty")
    return value


def opt_str(
    obj: Mapping[str, Any], key: str, path: str, default: str | None = None, *, allow_null: bool = False
) -> str | None:
    """Like :func:`req_str` but returns ``default`` when absent (or null, if ``allow_null``)."""
    value = obj.get(key, _MISSING)
    if value is _MISSING or (value is None and allow_null):
        return default
    return req_str(obj, key, path, allow_empty=True)


def req_number(obj: Mapping[str, Any], key: str, path: str, *, allow_negative: bool = False) -> float:
    """The member ``key`` as a finite float (ints accepted); see the module docstring for rules."""
    value = obj.get(key, _MISSING)
    if value is _MISSING:
        raise ScenarioError(field_path(path, key), "required number is missing")
    tv = type(value)
    # fast path: a plain non-negative finite number
    if (tv is float or tv is int) and 0 <= value <= _DOUBLE_MAX:
        return float(value)
    return check_number(value, field_path(path, key), allow_negative=allow_negative)


def opt_number(
    obj: Mapping[str, Any], key: str, path: str, default: float = 0.0, *, allow_negative: bool = False
) -> float:
    """Like :func:`req_number` but returns ``default`` when the member is absent."""
    if key not in obj:
        return default
    return req_number(obj, key, path, allow_negative=allow_negative)


def req_int(obj: Mapping[str, Any], key: str, path: str, *, allow_negative: bool = False) -> int:
    """The member ``key`` as an int (integral floats accepted)."""
    value = obj.get(key, _MISSING)
    if value is _MISSING:
        raise ScenarioError(field_path(path, key), "required integer is missing")
    if type(value) is int and value >= 0:
        return value
    return check_int(value, field_path(path, key), allow_negative=allow_negative)


def opt_int(obj: Mapping[str, Any], key: str, path: str, default: int = 0, *, allow_negative: bool = False) -> int:
    """Like :func:`req_int` but returns ``default`` when the member is absent."""
    if key not in obj:
        return default
    return req_int(obj, key, path, allow_negative=allow_negative)


def req_bool(obj: Mapping[str, Any], key: str, path: str) -> bool:
    """The member ``key`` as a JSON boolean (no truthiness: ``0``/``"true"`` are errors)."""
    value = obj.get(key, _MISSING)
    if value is _MISSING:
        raise ScenarioError(field_path(path, key), "required boolean is missing")
    if not isinstance(value, bool):
        raise ScenarioError(field_path(path, key), f"expected a boolean, got {json_type_name(value)}")
    return value


def opt_bool(obj: Mapping[str, Any], key: str, path: str, default: bool = False) -> bool:
    """Like :func:`req_bool` but returns ``default`` when the member is absent."""
    if key not in obj:
        return default
    return req_bool(obj, key, path)


def req_str_list(obj: Mapping[str, Any], key: str, path: str) -> list[str]:
    """The member ``key`` as an array of strings (each element checked, errors name ``key[i]``)."""
    items = req_list(obj, key, path)
    out: list[str] = []
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise ScenarioError(field_path(field_path(path, key), i), f"expected a string, got {json_type_name(item)}")
        out.append(item)
    return out


def opt_str_list(obj: Mapping[str, Any], key: str, path: str) -> list[str] | None:
    """Like :func:`req_str_list` but returns ``None`` when the member is absent."""
    if key not in obj:
        return None
    return req_str_list(obj, key, path)


def require_object(value: object, field: str) -> Mapping[str, Any]:
    """Validate an already-extracted value (e.g. a document root or a map value) as an object."""
    if not isinstance(value, Mapping):
        raise ScenarioError(field or "$", f"expected an object, got {json_type_name(value)}")
    return value


def reject_unknown_keys(obj: Mapping[str, Any], allowed: frozenset[str] | set[str], path: str) -> None:
    """Raise for the first member of ``obj`` not in ``allowed`` (used by our own strict contracts)."""
    for key in obj:
        if key not in allowed:
            raise ScenarioError(field_path(path, key), f"unknown field; expected one of {', '.join(sorted(allowed))}")
