"""Predicted broker load after a set of bundle moves (pure; used for every plan's before/after).

Model (documented, deliberately simple): a bundle carries its share of its broker's traffic.
Moving bundle b from S to D moves, in absolute units of the load report,
  * bandwidthIn.usage  x  b.msgThroughputIn  / S.msgThroughputIn,
  * bandwidthOut.usage x  b.msgThroughputOut / S.msgThroughputOut,
  * cpu.usage          x (b.msgRateIn + b.msgRateOut) / (S.msgRateIn + S.msgRateOut)
from S to D. Memory and direct memory are left unchanged (they follow the JVM, not the bundle).
The CPU share attributes all of S's CPU to message handling, so it overstates what moves; the
numbers are predictions, and the executed plan records the measured ones next to them.
Usage figures use Pulsar's weighted max resource usage (float32 percentUsage, /100).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pulsar_rebalance.core.contract.load_json import local_broker_data_from_json
from pulsar_rebalance.core.pulsar.load import LocalBrokerData, NamespaceBundleStats, ResourceUsage


@dataclass(frozen=True)
class Move:
    bundle: str
    source: str
    destination: str


def _res(d: LocalBrokerData) -> dict[str, ResourceUsage]:
    return {
        "cpu": d.cpu,
        "memory": d.memory,
        "directMemory": d.direct_memory,
        "bandwidthIn": d.bandwidth_in,
        "bandwidthOut": d.bandwidth_out,
    }


def _cpu_costs(parsed: Mapping[str, LocalBrokerData]) -> tuple[dict[str, float], float] | None:
    """Each broker's CPU cost per message (its report's CPU over its message rate) and the median broker's
    (None: no broker reports a message): from the reports alone, so computed once per set of reports."""
    per_msg = {
        b: d.cpu.usage / (d.msg_rate_in + d.msg_rate_out)
        for b, d in parsed.items()
        if d.msg_rate_in + d.msg_rate_out > 0
    }
    if not per_msg:
        return None
    costs = sorted(per_msg.values())
    return per_msg, costs[len(costs) // 2]


def _weighted(res: Mapping[str, tuple[float, float]], weights: tuple[float, float, float, float, float]) -> float:
    keys = ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")
    return max(ResourceUsage(*res[k]).percent_usage() * w for k, w in zip(keys, weights)) / 100.0


class LoadState:
    """The brokers' load as their reports give it, with moves applied one by one (the model above).

    The one place the attribution arithmetic lives: :func:`predict` and the do-no-harm guard
    (:mod:`pulsar_rebalance.core.guard`) both apply moves through it. :meth:`copy` gives an
    independent state (for trying a move and keeping it only if it passes).
    """

    def __init__(
        self,
        reports: Mapping[str, Mapping[str, Any]],
        weights: tuple[float, float, float, float, float],
        extra_stats: Mapping[str, NamespaceBundleStats] | None = None,
    ) -> None:
        self._start({b: local_broker_data_from_json(r, f"load-report[{b}]") for b, r in reports.items()}, weights)
        self.extra_stats: Mapping[str, NamespaceBundleStats] = extra_stats or {}

    def _start(self, parsed: dict[str, LocalBrokerData], weights: tuple[float, float, float, float, float]) -> None:
        self.weights = weights
        self.parsed = parsed
        self.extra_stats = {}
        self._costs = _cpu_costs(parsed)
        self.state: dict[str, dict[str, Any]] = {}
        for b, d in self.parsed.items():
            self.state[b] = {
                "res": {k: (v.usage, v.limit) for k, v in _res(d).items()},
                "msgRate": d.msg_rate_in + d.msg_rate_out,
                "msgThroughputIn": d.msg_throughput_in,
                "msgThroughputOut": d.msg_throughput_out,
                "bundles": len(d.last_stats) or d.num_bundles,
            }

    @classmethod
    def from_parsed(
        cls, brokers: Mapping[str, LocalBrokerData], weights: tuple[float, float, float, float, float]
    ) -> LoadState:
        """The same state from already parsed load reports (the planner's input)."""
        self = object.__new__(cls)
        self._start(dict(brokers), weights)
        return self

    def copy(self) -> LoadState:
        other = object.__new__(LoadState)
        other.weights, other.parsed, other.extra_stats = self.weights, self.parsed, self.extra_stats
        other._costs = self._costs
        other.state = {b: {**s, "res": dict(s["res"])} for b, s in self.state.items()}
        return other

    def usage(self, broker: str) -> float:
        """The broker's weighted max resource usage now (fraction), unrounded."""
        return _weighted(self.state[broker]["res"], self.weights)

    def usages(self) -> dict[str, float]:
        return {b: self.usage(b) for b in self.state}

    def bundle_stats(self, m: Move) -> NamespaceBundleStats | None:
        """The sample the move is predicted from (None: the move cannot be predicted)."""
        if m.source not in self.parsed or m.destination not in self.parsed:
            return None
        return self.parsed[m.source].last_stats.get(m.bundle) or self.extra_stats.get(m.bundle)

    def apply(self, m: Move, arriving: Mapping[str, float] | None = None) -> dict[str, Any] | None:
        """Apply ``m``; returns its step (source and destination usage just before and after, rounded),
        or None, changing nothing, when it cannot be predicted (a broker without a report, a bundle
        without a sample). ``arriving``: what the destination takes per resource, when not what the
        source loses (:meth:`arrival_amounts`)."""
        st = self.bundle_stats(m)
        if st is None:
            return None
        src, dst = self.state[m.source], self.state[m.destination]
        src_before, dst_before = self.usage(m.source), self.usage(m.destination)
        for key, amount in self._amounts(m, st).items():
            su, sl = src["res"][key]
            du, dl = dst["res"][key]
            src["res"][key] = (max(0.0, su - amount), sl)
            dst["res"][key] = (du + (amount if arriving is None else arriving.get(key, amount)), dl)
        rate = st.msg_rate_in + st.msg_rate_out
        src["msgRate"] -= rate
        dst["msgRate"] += rate
        src["msgThroughputIn"] -= st.msg_throughput_in
        dst["msgThroughputIn"] += st.msg_throughput_in
        src["msgThroughputOut"] -= st.msg_throughput_out
        dst["msgThroughputOut"] += st.msg_throughput_out
        src["bundles"] -= 1
        dst["bundles"] += 1
        return {
            "source": {"before": round(src_before, 6), "after": round(self.usage(m.source), 6)},
            "destination": {"before": round(dst_before, 6), "after": round(self.usage(m.destination), 6)},
        }

    def _amounts(self, m: Move, st: NamespaceBundleStats) -> dict[str, float]:
        """What ``m`` moves per resource, in the source report's units (its share of the source's usage)."""
        return self.traffic_amounts(
            m.source, st.msg_rate_in + st.msg_rate_out, st.msg_throughput_in, st.msg_throughput_out
        )

    def traffic_amounts(
        self, source: str, msg_rate: float, throughput_in: float, throughput_out: float
    ) -> dict[str, float]:
        """What moving this much traffic (msg/s in + out, bytes/s in, bytes/s out) off ``source`` moves per
        resource, in its report's units: its share of the source's reported usage (the model above)."""
        src0 = self.parsed[source]
        res = _res(src0)
        return {
            "bandwidthIn": res["bandwidthIn"].usage * _share(throughput_in, src0.msg_throughput_in),
            "bandwidthOut": res["bandwidthOut"].usage * _share(throughput_out, src0.msg_throughput_out),
            "cpu": res["cpu"].usage * _share(msg_rate, src0.msg_rate_in + src0.msg_rate_out),
        }

    def arrival_amounts(self, m: Move) -> dict[str, float] | None:
        """What ``m``'s destination takes per resource at its own CPU cost per message (its report's CPU over
        its message rate, at least the median broker's), where that is less than the bundle's share of its
        source's CPU (a source in a queue near saturation, or slower, pays more per message than the
        destination will); bandwidth as its share. None: the move cannot be predicted."""
        st = self.bundle_stats(m)
        if st is None:
            return None
        out = self._amounts(m, st)
        if self._costs is None:
            return out
        per_msg, typical = self._costs
        rate = st.msg_rate_in + st.msg_rate_out
        at_destination = rate * max(per_msg.get(m.destination, typical), typical)
        out["cpu"] = min(out["cpu"], at_destination)
        return out

    def destination_after(self, destination: str, amounts: Mapping[str, float]) -> float:
        """``destination``'s usage if it took ``amounts`` (see :meth:`traffic_amounts`), without applying them."""
        dst = dict(self.state[destination]["res"])
        for key, amount in amounts.items():
            dst[key] = (dst[key][0] + amount, dst[key][1])
        return _weighted(dst, self.weights)

    def add(self, source: str, destination: str, amounts: Mapping[str, float]) -> None:
        """Move ``amounts`` from ``source`` to ``destination`` (usage only; the traffic counters stay)."""
        src, dst = self.state[source]["res"], self.state[destination]["res"]
        for key, amount in amounts.items():
            src[key] = (max(0.0, src[key][0] - amount), src[key][1])
            dst[key] = (dst[key][0] + amount, dst[key][1])

    def usage_after(self, m: Move) -> tuple[float, float] | None:
        """(source, destination) usage if ``m`` were applied, without applying it (None: cannot be predicted)."""
        st = self.bundle_stats(m)
        if st is None:
            return None
        src, dst = dict(self.state[m.source]["res"]), dict(self.state[m.destination]["res"])
        for key, amount in self._amounts(m, st).items():
            src[key] = (max(0.0, src[key][0] - amount), src[key][1])
            dst[key] = (dst[key][0] + amount, dst[key][1])
        return _weighted(src, self.weights), _weighted(dst, self.weights)

    def snapshots(self) -> dict[str, dict[str, Any]]:
        return {b: _snapshot(s, self.weights) for b, s in self.state.items()}


def predict(
    reports: Mapping[str, Mapping[str, Any]],
    moves: Iterable[Move],
    weights: tuple[float, float, float, float, float],
    extra_stats: Mapping[str, NamespaceBundleStats] | None = None,
    arriving: Mapping[int, Mapping[str, float]] | None = None,
) -> dict[str, Any]:
    """Per-broker before/after usage for ``moves`` applied to the brokers' load reports.

    ``arriving``: per move index, what its destination takes when not its share of the source (the
    do-no-harm guard's overload relief, :meth:`LoadState.arrival_amounts`).

    Bundle samples come from the source broker's ``lastStats``, or from ``extra_stats`` for bundles
    that do not exist yet (the children of a split planned in the same plan). Returns
    ``{"brokers": {id: {"before": {...}, "after": {...}}}, "maxUsageBefore", "maxUsageAfter", ...,
    "steps"}``: ``steps[i]`` is what move ``i`` alone changes, applied in order (the source's and the
    destination's usage just before and just after it; None for a move that could not be predicted).
    """
    load = LoadState(reports, weights, extra_stats)
    before = load.snapshots()
    steps = [load.apply(m, (arriving or {}).get(i)) for i, m in enumerate(moves)]
    after = load.snapshots()
    brokers = {
        b: {"before": before[b], "after": after[b], "diff": round(after[b]["usage"] - before[b]["usage"], 6)}
        for b in sorted(load.state)
    }
    usages_before = [v["usage"] for v in before.values()]
    usages_after = [v["usage"] for v in after.values()]
    return {
        "brokers": brokers,
        "maxUsageBefore": max(usages_before, default=0.0),
        "maxUsageAfter": max(usages_after, default=0.0),
        "usageStdBefore": _std(usages_before),
        "usageStdAfter": _std(usages_after),
        "steps": steps,
    }


def _share(part: float, whole: float) -> float:
    return 0.0 if whole <= 0 else min(1.0, part / whole)


def _snapshot(s: Mapping[str, Any], weights: tuple[float, float, float, float, float]) -> dict[str, Any]:
    res = s["res"]
    return {
        "usage": round(_weighted(res, weights), 6),
        "cpu": round(ResourceUsage(*res["cpu"]).percent_usage(), 3),
        "bandwidthIn": round(ResourceUsage(*res["bandwidthIn"]).percent_usage(), 3),
        "bandwidthOut": round(ResourceUsage(*res["bandwidthOut"]).percent_usage(), 3),
        "msgRate": round(s["msgRate"], 3),
        "msgThroughput": round(s["msgThroughputIn"] + s["msgThroughputOut"], 3),
        "bundles": s["bundles"],
    }


def _std(xs: list[float]) -> float:
    if not xs:
        return 0.0
    avg = sum(xs) / len(xs)
    std: float = (sum((x - avg) ** 2 for x in xs) / len(xs)) ** 0.5  # float ** float is typed Any (may be complex)
    return round(std, 6)
