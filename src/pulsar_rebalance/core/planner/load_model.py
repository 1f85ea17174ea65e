"""The planner's view of the cluster: absolute resource usage per broker and per bundle.

Pulsar's shedders compare brokers by a percentage and bundles by throughput, which breaks down when
brokers differ in size and when CPU is driven by message rate rather than bytes. The planner keeps,
per broker, the absolute usage and limit of each of Pulsar's five resources (``cpu``, ``memory``,
``directMemory``, ``bandwidthIn``, ``bandwidthOut``, as in ``LocalBrokerData``) and estimates what
each bundle contributes to each resource from the load reports themselves:

* a linear model per resource, fitted across brokers by least squares:
  ``usage_r(broker) = base_r + sum_k coef_rk * feature_k(broker)``, features being
  ``cpu``: msg/s and bytes/s; ``bandwidthIn``: bytes/s in; ``bandwidthOut``: bytes/s out;
  ``memory``: topics and msg/s; ``directMemory``: bytes/s. Negative coefficients are dropped
  (refit), and with too few brokers the fit goes through the origin (usage proportional to traffic);
* a resource whose fit explains less than 30 % of its variance across brokers (``MIN_R2``) is taken
  as not driven by bundle traffic: all base, so no move chases it (the broker gets a warning instead);
* the coefficients are smoothed across cycles (an EMA giving each new fit weight 0.2, carried in the
  planner's memory): one cycle's fit is noisy (CPU noise, message rate and bytes moving together),
  and a bundle whose traffic swings would otherwise be sized with the coefficients of its quiet phase;
* a bundle's contribution is ``coef . feature(bundle)``; the broker's *base* (what no bundle
  explains: JVM, GC, noise) stays with the broker when bundles move.

A broker's capacity comes from its reported limits, so usage is capacity-normalised: the weighted
max over resources of ``usage / limit`` (Pulsar's ``getMaxResourceUsageWithWeight``, weights from the
config). Pure Python, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pulsar_rebalance.core.config import LoadBalancerConfig
from pulsar_rebalance.core.load import BundleData, LocalBrokerData, NamespaceBundleStats

MIN_R2 = 0.3
"""Below this share of explained variance a resource is treated as not driven by bundle traffic."""
RESOURCES = ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")
_FEATURES: Mapping[str, tuple[int, ...]] = {
    # feature indexes into Features: 0 msg/s, 1 bytes/s in, 2 bytes/s out, 3 bytes/s total, 4 topics
    "cpu": (0, 3),
    "memory": (4, 0),
    "directMemory": (3,),
    "bandwidthIn": (1,),
    "bandwidthOut": (2,),
}


def features_of(rate: float, thr_in: float, thr_out: float, topics: float) -> tuple[float, float, float, float, float]:
    return (rate, thr_in, thr_out, thr_in + thr_out, topics)


def stats_features(s: NamespaceBundleStats) -> tuple[float, float, float, float, float]:
    return features_of(s.msg_rate_in + s.msg_rate_out, s.msg_throughput_in, s.msg_throughput_out, s.topics)


def planning_features(
    s: NamespaceBundleStats, bd: BundleData | None, peak: Sequence[float] | None = None
) -> tuple[float, float, float, float, float]:
    """What the planner plans with: per value, the largest of the last sample, the short-term average
    and the remembered recent peak (``peak`` = msg/s, bytes/s in, bytes/s out).

    Planning for the recent peak (an on/off consumer, a burst that just ended) keeps a plan from
    being undone by the next swing; the short-term average (10 samples) is Pulsar's own BundleData.
    """
    rate, tin, tout = s.msg_rate_in + s.msg_rate_out, s.msg_throughput_in, s.msg_throughput_out
    if bd is not None and bd.short_term_data.num_samples > 0:
        st = bd.short_term_data
        rate = max(rate, st.msg_rate_in + st.msg_rate_out)
        tin = max(tin, st.msg_throughput_in)
        tout = max(tout, st.msg_throughput_out)
    if peak is not None:
        rate, tin, tout = max(rate, peak[0]), max(tin, peak[1]), max(tout, peak[2])
    return features_of(rate, tin, tout, s.topics)


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None if singular."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for col in range(n):
        piv = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[piv][col]) < 1e-12:
            return None
        m[col], m[piv] = m[piv], m[col]
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                if f:
                    for c in range(col, n + 1):
                        m[r][c] -= f * m[col][c]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit_resource(ys: Sequence[float], xs: Sequence[Sequence[float]]) -> tuple[float, list[float]]:
    """``y = a + sum(c_k x_k)`` with ``a, c_k >= 0`` (features with a negative fit are dropped)."""
    n = len(ys)
    k = len(xs[0]) if xs else 0
    active = list(range(k))
    while True:
        intercept = n >= len(active) + 3
        cols = [[x[j] for j in active] for x in xs]
        # scale columns for conditioning
        scales = [max((abs(r[i]) for r in cols), default=0.0) or 1.0 for i in range(len(active))]
        rows = [[v / scales[i] for i, v in enumerate(r)] + ([1.0] if intercept else []) for r in cols]
        p = len(active) + (1 if intercept else 0)
        if p == 0:
            return (sum(ys) / n if n else 0.0), [0.0] * k
        ata = [[sum(r[i] * r[j] for r in rows) + (1e-9 if i == j else 0.0) for j in range(p)] for i in range(p)]
        aty = [sum(r[i] * y for r, y in zip(rows, ys)) for i in range(p)]
        sol = _solve(ata, aty)
        if sol is None:
            if len(active) <= 1:
                return (sum(ys) / n if n else 0.0), [0.0] * k
            active = active[:1]
            continue
        coefs = [sol[i] / scales[i] for i in range(len(active))]
        a = sol[-1] if intercept else 0.0
        neg = [active[i] for i, c in enumerate(coefs) if c < 0]
        if neg:
            active = [j for j in active if j not in neg]
            continue
        if a < 0:  # a negative base is not physical: refit through the origin
            if intercept:
                rows_o = [[v / scales[i] for i, v in enumerate(r)] for r in cols]
                ata = [
                    [sum(r[i] * r[j] for r in rows_o) + (1e-9 if i == j else 0.0) for j in range(len(active))]
                    for i in range(len(active))
                ]
                aty = [sum(r[i] * y for r, y in zip(rows_o, ys)) for i in range(len(active))]
                sol = _solve(ata, aty)
                if sol is None or any(c < 0 for c in sol):
                    return 0.0, [0.0] * k
                coefs = [sol[i] / scales[i] for i in range(len(active))]
            a = 0.0
        full = [0.0] * k
        for i, j in enumerate(active):
            full[j] = coefs[i]
        # Load the bundles do not explain cannot be moved with them: with a poor fit (R^2 < MIN_R2 on
        # a resource that varies across brokers) the resource is all base, and no move chases it.
        mean = sum(ys) / n
        ss_tot = sum((y - mean) ** 2 for y in ys)
        if n >= 3 and ss_tot > 1e-12 * n * max(mean * mean, 1e-30):
            ss_res = sum((y - a - sum(c * x[j] for j, c in enumerate(full))) ** 2 for y, x in zip(ys, xs))
            if 1.0 - ss_res / ss_tot < MIN_R2:
                return mean, [0.0] * k
        return a, full


@dataclass(slots=True)
class BundleLoad:
    name: str
    broker: str
    vec: list[float]
    """Absolute contribution per resource (RESOURCES order, the resources' own units)."""
    msg_rate: float
    throughput: float
    clients: int
    topics: int
    feat_in: float = 0.0
    """bytes/s in and out the plan assumed (for the children of a split)."""
    feat_out: float = 0.0


class ClusterView:
    """Mutable what-if view: per broker absolute usage and limits, per bundle its contribution."""

    def __init__(
        self,
        brokers: Mapping[str, LocalBrokerData],
        bundle_data: Mapping[str, BundleData],
        config: LoadBalancerConfig,
        peaks: Mapping[str, Sequence[float]] | None = None,
        prior: Mapping[str, Sequence[float]] | None = None,
        smoothing: float = 0.2,
    ) -> None:
        self.config = config
        self.weights = [
            config.load_balancer_cpu_resource_weight,
            config.load_balancer_memory_resource_weight,
            config.load_balancer_direct_memory_resource_weight,
            config.bandwidth_in_resource_weight,
            config.bandwidth_out_resource_weight,
        ]
        self.brokers = list(brokers)
        self._usage: dict[str, float] = {}
        self.limit: dict[str, list[float]] = {}
        self.used: dict[str, list[float]] = {}
        reported: dict[str, list[float]] = {}
        broker_feat: dict[str, list[float]] = {}
        for b, d in brokers.items():
            res = (d.cpu, d.memory, d.direct_memory, d.bandwidth_in, d.bandwidth_out)
            self.limit[b] = [r.limit for r in res]
            reported[b] = [r.usage for r in res]
            f = [0.0] * 5
            for s in d.last_stats.values():
                for i, v in enumerate(stats_features(s)):
                    f[i] += v
            broker_feat[b] = f
        # fit each resource across brokers
        self.coef: list[list[float]] = []
        for ri, r in enumerate(RESOURCES):
            idx = _FEATURES[r]
            ys = [reported[b][ri] for b in self.brokers]
            xs = [[broker_feat[b][j] for j in idx] for b in self.brokers]
            _, c = fit_resource(ys, xs) if self.brokers else (0.0, [0.0] * len(idx))
            full = [0.0] * 5
            for j, v in zip(idx, c):
                full[j] = v
            before = (prior or {}).get(r)
            if before is not None:  # one cycle's fit is noisy: smoothed across cycles (EMA)
                full = [(1.0 - smoothing) * b + smoothing * v for b, v in zip(before, full)]
            self.coef.append(full)
        self._sparse = [
            (i, [(j, c) for j, c in enumerate(coefs) if c]) for i, coefs in enumerate(self.coef) if self.weights[i] > 0
        ]
        # per broker, (resource, weight / limit) of the resources that count: usage = max(used * that)
        self._scale = {
            b: [(i, w / lim) for i, (lim, w) in enumerate(zip(self.limit[b], self.weights)) if lim > 0 and w > 0]
            for b in self.brokers
        }
        self.bundles: dict[str, BundleLoad] = {}
        self.owned: dict[str, list[str]] = {b: [] for b in self.brokers}
        peaks = peaks or {}
        contribution = self.contribution
        for b, d in brokers.items():
            cur = contribution(broker_feat[b])  # linear: the sum of the bundles' contributions
            plan = [0.0] * 5
            owned = self.owned[b]
            for name, s in d.last_stats.items():
                pf = planning_features(s, bundle_data.get(name), peaks.get(name))
                pvec = contribution(pf)
                for i in range(5):
                    plan[i] += pvec[i]
                self.bundles[name] = BundleLoad(
                    name, b, pvec, pf[0], pf[3], s.producer_count + s.consumer_count, s.topics, pf[1], pf[2]
                )
                owned.append(name)
            # base = what the bundles do not explain (never negative); planned usage = base + planned bundles
            self.used[b] = [max(0.0, reported[b][i] - cur[i]) + plan[i] for i in range(5)]

    def coefficients(self) -> dict[str, list[float]]:
        """Per resource the coefficients used (feature order of :func:`features_of`), for the next cycle's prior."""
        return {r: list(c) for r, c in zip(RESOURCES, self.coef)}

    def contribution(self, f: Sequence[float]) -> list[float]:
        """A bundle's absolute contribution per resource (0 for resources with weight 0)."""
        out = [0.0, 0.0, 0.0, 0.0, 0.0]
        for i, terms in self._sparse:
            v = 0.0
            for j, c in terms:
                v += c * f[j]
            out[i] = v
        return out

    def usage_of(self, used: Sequence[float], limit: Sequence[float]) -> float:
        best = 0.0
        for u, lim, w in zip(used, limit, self.weights):
            if lim > 0 and w > 0:
                v = w * u / lim
                if v > best:
                    best = v
        return best

    def usage(self, broker: str) -> float:
        """Capacity-normalised usage now (cached; moves and splits refresh it)."""
        u = self._usage.get(broker)
        if u is None:
            used = self.used[broker]
            u = self._usage[broker] = max((used[i] * k for i, k in self._scale[broker]), default=0.0)
        return u

    def usage_after(self, broker: str, vec: Sequence[float], sign: float) -> float:
        """Usage of ``broker`` if ``vec`` were added (sign 1) or removed (sign -1)."""
        used = self.used[broker]
        return max(((used[i] + sign * vec[i]) * k for i, k in self._scale[broker]), default=0.0)

    def ideal(self, brokers: Sequence[str] | None = None) -> float:
        """Total usage / total capacity on the binding resource (weighted): the best any plan could do."""
        brokers = self.brokers if brokers is None else brokers
        best = 0.0
        for i, w in enumerate(self.weights):
            cap = sum(self.limit[b][i] for b in brokers if self.limit[b][i] > 0)
            if cap > 0 and w > 0:
                tot = sum(self.used[b][i] for b in brokers if self.limit[b][i] > 0)
                best = max(best, w * tot / cap)
        return best

    def move(self, bundle: str, dest: str) -> None:
        bl = self.bundles[bundle]
        src = bl.broker
        for i, v in enumerate(bl.vec):
            self.used[src][i] -= v
            self.used[dest][i] += v
        self.owned[src].remove(bundle)
        self.owned[dest].append(bundle)
        bl.broker = dest
        self._usage.pop(src, None)
        self._usage.pop(dest, None)

    def replace_bundle(self, bundle: str, children: Sequence[BundleLoad]) -> None:
        """A split: the parent's load becomes its children's (same broker)."""
        parent = self.bundles.pop(bundle)
        self.owned[parent.broker].remove(bundle)
        for i, v in enumerate(parent.vec):
            self.used[parent.broker][i] -= v
        self._usage.pop(parent.broker, None)
        for c in children:
            self.bundles[c.name] = c
            self.owned[c.broker].append(c.name)
            for i, v in enumerate(c.vec):
                self.used[c.broker][i] += v


__all__ = ["RESOURCES", "BundleLoad", "ClusterView", "fit_resource", "planning_features", "stats_features"]
