"""Pulsar's placement constraints as its admin API returns them, read into
:mod:`pulsar_rebalance.core.pulsar.policies`' types: namespace isolation policies
(``/admin/v2/clusters/{cluster}/namespaceIsolationPolicies``), failure domains
(``.../failureDomains``) and each namespace's anti-affinity group (``.../antiAffinity``).

Every error is a :class:`~pulsar_rebalance.errors.ScenarioError` naming the field's path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pulsar_rebalance.core.contract.json_input import field_path, json_type_name, require_object
from pulsar_rebalance.core.pulsar.policies import (
    NO_POLICIES,
    UNLOAD_SCOPES,
    MinAvailablePolicy,
    NamespaceIsolationPolicy,
    PlacementPolicies,
)
from pulsar_rebalance.errors import ScenarioError

_INT_MAX = 2**31 - 1
_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def min_available_policy_from_json(raw: object, path: str, *, allow_negative: bool = False) -> MinAvailablePolicy:
    """``allow_negative``: accept a negative ``min_limit`` as Pulsar does (the simulator's admin API);
    the contract and collect refuse it."""
    obj = require_object(raw, path)
    _check_keys(obj, frozenset({"policy_type", "parameters"}), path)
    ptype = obj.get("policy_type")
    if ptype != "min_available":
        # AutoFailoverPolicyFactory.create: "Unrecognized auto_failover_policy"
        raise ScenarioError(
            field_path(path, "policy_type"),
            f"unrecognized auto_failover_policy {ptype!r}: Pulsar knows min_available",
        )
    pp = field_path(path, "parameters")
    if "parameters" not in obj:
        raise ScenarioError(pp, "required object is missing")
    params = require_object(obj["parameters"], pp)
    min_limit = _int_param(params, "min_limit", pp)
    if min_limit < 0 and not allow_negative:
        # a deviation: Pulsar's MinAvailablePolicy parses any int and, with a negative one, never fails
        # over to the secondaries; 0 says that explicitly, so a negative value is most likely a typo
        raise ScenarioError(
            field_path(pp, "min_limit"),
            f"{min_limit} is negative (Pulsar would never fail over to the secondaries; 0 says that explicitly)",
        )
    return MinAvailablePolicy(min_limit, _int_param(params, "usage_threshold", pp))


def _int_param(params: Mapping[str, Any], key: str, path: str) -> int:
    """``Integer.parseInt(parameters.get(key))``: Pulsar stores the parameters as strings; Jackson also
    reads a JSON number into them."""
    p = field_path(path, key)
    if key not in params:
        raise ScenarioError(p, "required by min_available")
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ScenarioError(p, f"expected an integer (string or number), got {json_type_name(value)}")
    if isinstance(value, str) and _JAVA_INT.fullmatch(value) is None:
        # Integer.parseInt: an optional sign and ASCII digits, nothing else (no blanks, no '_')
        raise ScenarioError(p, f"expected an integer, got {value!r}")
    n = int(value)
    if not -(2**31) <= n <= _INT_MAX:
        raise ScenarioError(p, f"{n} is outside Java's int range")
    return n


def _check_keys(obj: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
    for key in obj:
        if key in allowed or key == "description" or key.startswith("_"):
            continue
        raise ScenarioError(field_path(path, key), f"unknown field; expected one of {', '.join(sorted(allowed))}")


def _regex_list(obj: Mapping[str, Any], key: str, path: str, *, required: bool) -> tuple[re.Pattern[str], ...]:
    p = field_path(path, key)
    if key not in obj or obj[key] is None:
        if required:
            raise ScenarioError(p, "required array of regexes is missing")
        return ()
    items = obj[key]
    if not isinstance(items, list):
        raise ScenarioError(p, f"expected an array of regex strings, got {json_type_name(items)}")
    out: list[re.Pattern[str]] = []
    for i, item in enumerate(items):
        ip = field_path(p, i)
        if not isinstance(item, str):
            raise ScenarioError(ip, f"expected a regex string, got {json_type_name(item)}")
        try:
            out.append(re.compile(item))
        except re.error as exc:
            # NamespaceIsolationDataImpl.validateRegex: "invalid policy regex"
            raise ScenarioError(ip, f"invalid policy regex {item!r}: {exc}") from None
    return tuple(out)


def namespace_isolation_policy_from_json(
    name: str, raw: object, path: str, *, allow_negative_min_limit: bool = False
) -> NamespaceIsolationPolicy:
    """Validated as ``NamespaceIsolationDataImpl.validate`` does: ``namespaces`` and ``primary`` non-empty,
    ``secondary`` present, ``auto_failover_policy`` present, every regex compiles."""
    obj = require_object(raw, path)
    _check_keys(obj, frozenset({"namespaces", "primary", "secondary", "auto_failover_policy", "unload_scope"}), path)
    namespaces = _regex_list(obj, "namespaces", path, required=True)
    if not namespaces:
        raise ScenarioError(field_path(path, "namespaces"), "at least one namespace regex is required")
    primary = _regex_list(obj, "primary", path, required=True)
    if not primary:
        raise ScenarioError(field_path(path, "primary"), "at least one primary broker regex is required")
    secondary = _regex_list(obj, "secondary", path, required=True)
    ap = field_path(path, "auto_failover_policy")
    if obj.get("auto_failover_policy") is None:
        raise ScenarioError(ap, "required object is missing")
    failover = min_available_policy_from_json(obj["auto_failover_policy"], ap, allow_negative=allow_negative_min_limit)
    scope = obj.get("unload_scope")
    if scope is not None and scope not in UNLOAD_SCOPES:
        raise ScenarioError(
            field_path(path, "unload_scope"), f"expected one of {', '.join(UNLOAD_SCOPES)}, got {scope!r}"
        )
    return NamespaceIsolationPolicy(name, namespaces, primary, secondary, failover, scope)


POLICY_KEYS = ("namespaceIsolationPolicies", "failureDomains", "antiAffinityGroups")


def parse_isolation_policies(
    raw: object, path: str, *, allow_negative_min_limit: bool = False
) -> tuple[NamespaceIsolationPolicy, ...]:
    """``namespaceIsolationPolicies``: the endpoint's ``{policyName: NamespaceIsolationData}``."""
    obj = require_object(raw, path)
    return tuple(
        namespace_isolation_policy_from_json(
            name, v, field_path(path, name), allow_negative_min_limit=allow_negative_min_limit
        )
        for name, v in obj.items()
    )


def parse_failure_domains(raw: object, path: str) -> dict[str, tuple[str, ...]]:
    """``failureDomains``: the endpoint's ``{domainName: {"brokers": [brokerId]}}``."""
    obj = require_object(raw, path)
    out: dict[str, tuple[str, ...]] = {}
    for name, value in obj.items():
        dp = field_path(path, name)
        if not name:
            raise ScenarioError(dp, "failure domain name must not be empty")
        dom = require_object(value, dp)
        _check_keys(dom, frozenset({"brokers"}), dp)
        bp = field_path(dp, "brokers")
        brokers = dom.get("brokers", [])
        if not isinstance(brokers, list):
            raise ScenarioError(bp, f"expected an array of broker ids, got {json_type_name(brokers)}")
        for i, b in enumerate(brokers):
            if not isinstance(b, str) or not b:
                raise ScenarioError(field_path(bp, i), "expected a non-empty broker id string")
        out[name] = tuple(brokers)
    return out


def parse_anti_affinity_groups(raw: object, path: str) -> dict[str, str]:
    """``antiAffinityGroups``: ``{"tenant/namespace": group}`` (each the ``antiAffinity`` endpoint's
    string); a blank group is dropped (``StringUtils.isBlank``: no group)."""
    obj = require_object(raw, path)
    out: dict[str, str] = {}
    for ns, group in obj.items():
        p = field_path(path, ns)
        tenant, sep, local = ns.partition("/")
        if not (tenant and sep and local) or local.count("/") > 1:
            raise ScenarioError(p, f"expected a namespace name 'tenant/namespace', got {ns!r}")
        if group is None:
            continue
        if not isinstance(group, str):
            raise ScenarioError(p, f"expected the group name string, got {json_type_name(group)}")
        if group.strip():
            out[ns] = group
    return out


def parse_policies(obj: Mapping[str, Any], path: str, base: PlacementPolicies = NO_POLICIES) -> PlacementPolicies:
    """The three fields of ``obj`` (each optional) over ``base``."""
    if not any(k in obj for k in POLICY_KEYS):
        return base
    return base.with_fields(
        parse_isolation_policies(obj["namespaceIsolationPolicies"], field_path(path, "namespaceIsolationPolicies"))
        if "namespaceIsolationPolicies" in obj
        else None,
        parse_failure_domains(obj["failureDomains"], field_path(path, "failureDomains"))
        if "failureDomains" in obj
        else None,
        parse_anti_affinity_groups(obj["antiAffinityGroups"], field_path(path, "antiAffinityGroups"))
        if "antiAffinityGroups" in obj
        else None,
    )
