"""The `split` and `bundles` JSON contracts, in process and through the real `pulsar-rebalance` CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pulsar_rebalance.core.contract.split import bundles_scenario, split_scenario
from pulsar_rebalance.errors import ScenarioError

from .test_split_algorithms import MB, forge_topic, seed_flow_topics

CLI = Path(sys.executable).with_name("pulsar-rebalance")


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert CLI.exists(), f"console script missing: {CLI}"
    return subprocess.run([str(CLI), *args], input=stdin, capture_output=True, text=True, timeout=120, check=False)


# ---------------------------------------------------------------------------------------------
# through the CLI
# ---------------------------------------------------------------------------------------------


def test_cli_split_seed_flow_or_qps_case1() -> None:
    scenario = {
        "algorithm": "flow_or_qps_equally_divide",
        "bundle": "public/default/0x00000000_0x80000000",
        "topics": seed_flow_topics(),
        "config": {"loadBalancerNamespaceBundleMaxMsgRate": 450, "loadBalancerNamespaceBundleMaxBandwidthMbytes": 200},
    }
    proc = run_cli("split", "-", stdin=json.dumps(scenario))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    out = json.loads(proc.stdout)
    # seed: 0x19500000 / 31500000 / 48500000 / 67000000 (hex added as decimal, no +1); Pulsar's values:
    assert out["boundaries"] == ["0x1c800001", "0x2e800001", "0x48800001", "0x67000001"]
    assert out["split"] is True
    assert len(out["children"]) == 5


def test_cli_bundles_from_file(tmp_path: Path) -> None:
    scenario = tmp_path / "ns.json"
    scenario.write_text(
        json.dumps(
            {"numBundles": 4, "topics": ["persistent://public/default/my-topic", "persistent://public/default/test"]}
        )
    )
    proc = run_cli("bundles", str(scenario), "--compact")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n") == 1  # --compact: one line
    out = json.loads(proc.stdout)
    assert out["boundaries"] == ["0x00000000", "0x40000000", "0x80000000", "0xc0000000", "0xffffffff"]
    assert out["topics"] == {
        "persistent://public/default/my-topic": "0x00000000_0x40000000",
        "persistent://public/default/test": "0x80000000_0xc0000000",
    }
    assert out["hashes"]["persistent://public/default/my-topic"] == "0x2bad45f7"


@pytest.mark.parametrize(
    ("command", "stdin", "fragment"),
    [
        ("split", '{"bundle": "0x00000000_0xffffffff",\n  "topics": [}', "<stdin>: invalid JSON at line 2 column"),
        ("decide", "{not json", "<stdin>: invalid JSON at line 1 column 2"),
        (
            "bundles",
            '{"boundaries": ["0x00000000", "0x80000000", "0x40000000"]}',
            "boundaries[2]: boundaries must be strictly increasing",
        ),
        (
            "split",
            '{"algorithm": "flow_or_qps_equally_divide", "bundle": "0x00000000_0xffffffff", '
            '"topics": {"persistent://a/b/c": {"msgRateIn": NaN, "msgRateOut": 0, "msgThroughputIn": 0, "msgThroughputOut": 0}}}',
            "invalid JSON: NaN is not valid JSON",
        ),
        (
            "split",
            '{"algorithm": "flow_or_qps_equally_divide", "bundle": "0x00000000_0xffffffff", '
            '"topics": {"persistent://a/b/c": {"msgRateIn": -1, "msgRateOut": 0, "msgThroughputIn": 0, "msgThroughputOut": 0}}}',
            "topics.persistent://a/b/c.msgRateIn: must not be negative",
        ),
        (
            "split",
            '{"algorithm": "hash_divide", "bundle": "0x00000000_0xffffffff"}',
            "algorithm: unknown split algorithm 'hash_divide'",
        ),
        ("split", '{"bundle": "0x00000000-0xffffffff"}', "bundle: invalid bundle range"),
        (
            "split",
            '{"bundle": "0x00000000_0xffffffff", "config": {"loadBalancerFoo": 1}}',
            "config.loadBalancerFoo: unknown load-balancer config key",
        ),
        ("split", "[1, 2]", "the scenario must be a JSON object"),
    ],
)
def test_cli_invalid_input_exit_2_nothing_on_stdout(command: str, stdin: str, fragment: str) -> None:
    proc = run_cli(command, "-", stdin=stdin)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    assert fragment in proc.stderr
    assert proc.stderr.count("\n") == 1  # exactly one line


def test_cli_missing_file_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    proc = run_cli("split", str(missing))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert str(missing) in proc.stderr and "cannot read scenario" in proc.stderr


# ---------------------------------------------------------------------------------------------
# in process: contract details and errors
# ---------------------------------------------------------------------------------------------


def _error(fn: Any, doc: dict[str, Any]) -> ScenarioError:
    with pytest.raises(ScenarioError) as info:
        fn(doc)
    return info.value


def test_no_split_keeps_the_bundle_and_says_why() -> None:
    out = split_scenario(
        {
            "algorithm": "topic_count_equally_divide",
            "bundle": "t/ns/0x00000000_0xffffffff",
            "topics": ["persistent://t/ns/only"],
        }
    )
    assert out == {
        "algorithm": "topic_count_equally_divide",
        "bundle": "t/ns/0x00000000_0xffffffff",
        "split": False,
        "boundaries": None,
        "children": ["t/ns/0x00000000_0xffffffff"],
        "reason": "topic_count_equally_divide: 1 topic(s) in the bundle; Pulsar needs at least 2",
    }


def test_boundaries_pulsar_rejects_are_reported_not_applied() -> None:
    # two topics at 0xfffffffe and 0xffffffff: flow_or_qps emits 0xfffffffe + 0 + 1 = 0xffffffff, the
    # bundle's own upper bound; Pulsar's factory rejects it (IllegalArgumentException) and nothing splits.
    topics = {
        forge_topic("persistent://t/ns/a-", 0xFFFFFFFE): {
            "msgRateIn": 40000,
            "msgRateOut": 0,
            "msgThroughputIn": 0,
            "msgThroughputOut": 0,
        },
        forge_topic("persistent://t/ns/b-", 0xFFFFFFFF): {
            "msgRateIn": 40000,
            "msgRateOut": 0,
            "msgThroughputIn": 0,
            "msgThroughputOut": 0,
        },
    }
    out = split_scenario(
        {"algorithm": "flow_or_qps_equally_divide", "bundle": "0xc0000000_0xffffffff", "topics": topics}
    )
    assert out["boundaries"] == ["0xffffffff"]
    assert out["split"] is False
    assert out["children"] == ["0xc0000000_0xffffffff"]
    assert "the split fails" in out["reason"]


def test_positions_accept_ints_and_hex_strings() -> None:
    topics = ["persistent://t/ns/a", "persistent://t/ns/b"]
    out = split_scenario(
        {
            "algorithm": "specified_positions_divide",
            "bundle": "0x00000000_0xffffffff",
            "topics": topics,
            "positions": [0x60000000, "0x20000000", "#40000000", -5],
        }
    )
    assert out["boundaries"] == ["0x20000000", "0x40000000", "0x60000000"]
    assert out["children"][0] == "0x00000000_0x20000000"


@pytest.mark.parametrize(
    ("doc", "field", "fragment"),
    [
        ({"bundle": "0x00000000_0xffffffff", "extra": 1}, "extra", "unknown field"),
        ({}, "bundle", "required"),
        ({"bundle": "tenant/0x00000000_0xzz"}, "bundle", "cannot parse"),
        ({"bundle": "0x00000000_0xffffffff", "algorithm": 7}, "algorithm", "unknown split algorithm"),
        (
            {
                "bundle": "0x00000000_0xffffffff",
                "algorithm": "flow_or_qps_equally_divide",
                "config": {"supportedNamespaceBundleSplitAlgorithms": ["range_equally_divide"]},
            },
            "algorithm",
            "not in supportedNamespaceBundleSplitAlgorithms",
        ),
        ({"bundle": "0x00000000_0xffffffff", "positions": [1]}, "positions", "only used by specified_positions_divide"),
        (
            {
                "bundle": "0x00000000_0xffffffff",
                "algorithm": "specified_positions_divide",
                "topics": ["persistent://t/n/a", "persistent://t/n/b"],
            },
            "positions",
            "can't be empty",
        ),
        (
            {"bundle": "0x00000000_0xffffffff", "algorithm": "specified_positions_divide", "positions": ["0xg"]},
            "positions[0]",
            "cannot parse",
        ),
        (
            {"bundle": "0x00000000_0xffffffff", "algorithm": "topic_count_equally_divide", "topics": ["my-topic"]},
            "topics[0]",
            "not a full topic name",
        ),
        (
            {"bundle": "0x00000000_0xffffffff", "topics": ["persistent://t/n/a", "persistent://t/n/a"]},
            "topics[1]",
            "duplicate",
        ),
        (
            {"bundle": "t/ns/0x00000000_0xffffffff", "topics": ["persistent://t/other/a"]},
            "topics[0]",
            "namespace 't/other'",
        ),
        # persistent://public/default/test hashes to 0xaa2e30f5, outside the first half
        (
            {"bundle": "0x00000000_0x80000000", "topics": ["persistent://public/default/test"]},
            "topics[0]",
            "outside bundle",
        ),
        (
            {
                "bundle": "0x00000000_0xffffffff",
                "algorithm": "flow_or_qps_equally_divide",
                "topics": ["persistent://t/n/a", "persistent://t/n/b"],
            },
            "topics",
            "needs per-topic rates",
        ),
        (
            {
                "bundle": "0x00000000_0xffffffff",
                "algorithm": "flow_or_qps_equally_divide",
                "topics": {"persistent://t/n/a": {"msgRateIn": 1, "msgRateOut": 1, "msgThroughputIn": 1}},
            },
            "topics.persistent://t/n/a.msgThroughputOut",
            "missing",
        ),
        ({"bundle": "0x00000000_0xffffffff", "topics": "persistent://t/n/a"}, "topics", "expected an object"),
        (
            {"bundle": "0x00000000_0xffffffff", "config": {"loadBalancerNamespaceBundleMaxMsgRate": "high"}},
            "config.loadBalancerNamespaceBundleMaxMsgRate",
            "valid integer",
        ),
    ],
)
def test_split_errors_name_the_field(doc: dict[str, Any], field: str, fragment: str) -> None:
    err = _error(split_scenario, doc)
    assert err.field == field
    assert fragment in err.message


def test_bundles_with_boundaries_and_hash_edge() -> None:
    edge = forge_topic("persistent://public/default/edge-", 0xFFFFFFFF)
    out = bundles_scenario(
        {"boundaries": ["0x00000000", "0x80000000", "0xffffffff"], "numBundles": 2, "topics": [edge]}
    )
    assert out["bundles"] == ["0x00000000_0x80000000", "0x80000000_0xffffffff"]
    # Pulsar throws IndexOutOfBoundsException for a hash equal to 0xffffffff; we use the closed last bundle
    assert out["topics"] == {edge: "0x80000000_0xffffffff"}
    assert out["hashes"] == {edge: "0xffffffff"}


@pytest.mark.parametrize(
    ("doc", "field", "fragment"),
    [
        ({"topics": []}, "boundaries", 'give "boundaries"'),
        ({"numBundles": 0}, "numBundles", "must be in [1,"),
        ({"numBundles": 2_000_000}, "numBundles", "must be in [1,"),
        ({"numBundles": "4"}, "numBundles", "expected an integer"),
        ({"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 2}, "numBundles", "does not match"),
        ({"boundaries": ["0x00000000", "0x00000000"]}, "boundaries[1]", "strictly increasing"),
        (
            {"boundaries": ["0x80000000", "0xffffffff"], "topics": ["persistent://public/default/my-topic"]},
            "topics[0]",
            "below the first boundary",
        ),
        ({"numBundles": 4, "topics": ["public/default/my-topic"]}, "topics[0]", "not a full topic name"),
        ({"numBundles": 4, "topics": "persistent://a/b/c"}, "topics", "expected an array"),
        ({"numBundles": 4, "bundles": []}, "bundles", "unknown field"),
    ],
)
def test_bundles_errors_name_the_field(doc: dict[str, Any], field: str, fragment: str) -> None:
    err = _error(bundles_scenario, doc)
    assert err.field == field
    assert fragment in err.message


def test_mib_unit_and_double_arithmetic_of_bandwidth_limit() -> None:
    # loadBalancerNamespaceBundleMaxBandwidthMbytes is MiB (1024 * 1024), not 10^6 bytes
    a = forge_topic("persistent://t/ns/a-", 0x10000000)
    b = forge_topic("persistent://t/ns/b-", 0x20000000)
    rates = {"msgRateIn": 0, "msgRateOut": 0, "msgThroughputOut": 0}
    doc: dict[str, Any] = {
        "algorithm": "flow_or_qps_equally_divide",
        "bundle": "0x00000000_0x80000000",
        "topics": {a: dict(rates, msgThroughputIn=60 * MB), b: dict(rates, msgThroughputIn=51 * MB)},
        "config": {"loadBalancerNamespaceBundleMaxBandwidthMbytes": 100},
    }
    assert split_scenario(doc)["boundaries"] == ["0x18000001"]  # 111 MiB >= 1.1 x 100 MiB; 60 + 51 > 100
    doc["topics"][b]["msgThroughputIn"] = 46 * MB  # 106 MiB: > 1.1 x 10^8 bytes but < 1.1 x 100 MiB
    assert split_scenario(doc)["boundaries"] is None
    # exactly 110 MiB is not split either: 104857600 * (1 + 10 / 100.0) == 115343360.00000001 in double
    doc["topics"][b]["msgThroughputIn"] = 50 * MB
    out = split_scenario(doc)
    assert out["boundaries"] is None
    assert "115343360 B/s < 115343360.0000000" in out["reason"]
