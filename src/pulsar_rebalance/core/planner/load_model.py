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
* the fit gives the *shape* (how msg/s and bytes/s weigh against each other), never the whole answer:
  each broker's usage above the base is attributed to its bundles in proportion to their fitted
  load (a per-broker scale, bounded to [1/4, 4] for a good fit). A broker whose cost per message
  differs (a faster CPU, a queue near saturation, dispatch costlier than publish) is read from its own
  report, as Pulsar attributes a broker's usage to its bundles by traffic share;
* a resource whose fit explains less than 30 % of its variance across brokers (``MIN_R2``), or whose
  coefficients all drop out, keeps the last good fit's shape (carried in the planner's memory), or
  without one a fixed proxy (msg/s plus bytes/s / 1 KiB for CPU, the bytes for bandwidth): Pulsar's own
  proportional attribution, never "nothing moves it" (a convex CPU fits badly across brokers, and a
  model that gave up on it left a broker at 95 % in an independent review);
* the coefficients are smoothed across cycles (an EMA giving each new good fit weight 0.2, carried in
  the planner's memory): one cycle's fit is noisy (CPU noise, message rate and bytes moving together);
* the **noise** of the reports: the robust spread (1.4826 x median absolute deviation) of the fit's
  residuals across brokers, capacity-normalised; the planner widens its trigger and minimum gain by it,
  so that it acts only where a move gains more than the reports can tell apart;
* a bundle's contribution is ``scale_broker * coef . feature(bundle)``; the broker's *base* (what no
  bundle explains: JVM, GC) stays with the broker when bundles move.

A broker's capacity comes from its reported limits, so usage is capacity-normalised: the weighted
max over resources of ``usage / limit`` (Pulsar's ``getMaxResourceUsageWithWeight``, weights from the
config). Pure Python, no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig
from pulsar_rebalance.core.pulsar.load import BundleData, LocalBrokerData, NamespaceBundleStats

MIN_R2 = 0.3
"""Below this share of explained variance a fit's shape is not trusted (the last good one, or the proxy, is used)."""
SCALE_BOUNDS = (0.25, 4.0)
"""A broker's usage per unit of fitted load stays within these multiples of the cluster's fit."""
NOISE_BAND = 2.0
"""A broker's own usage per unit of load replaces the fit's only when they differ by more than this many noise sigmas."""
TRIM_MIN_BROKERS = 8
"""The fit leaves out brokers far off its shape only with at least this many (fewer say too little about a shape)."""
TRIM_SIGMAS = 4.0
"""A broker whose residual lies further than this many robust sigmas from the median is left out of the fit."""
NOISE_FLOOR_BROKERS = 4
"""With fewer brokers than this the residuals say nothing about noise (0 is used)."""
MAX_SMOOTHED_CHANGE = 0.5
"""A broker whose load changed by more than this share since the last cycle is read from its new report alone."""
PROXY: Mapping[str, tuple[float, float, float, float, float]] = {
    # when no fit can be trusted: Pulsar-like attribution by traffic share (features as in features_of)
    "cpu": (1.0, 0.0, 0.0, 1.0 / 1024.0, 0.0),
    "memory": (1.0, 0.0, 0.0, 0.0, 0.0),
    "directMemory": (0.0, 0.0, 0.0, 1.0, 0.0),
    "bandwidthIn": (0.0, 1.0, 0.0, 0.0, 0.0),
    "bandwidthOut": (0.0, 0.0, 1.0, 0.0, 0.0),
}
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


@dataclass(frozen=True, slots=True)
class Fit:
    intercept: float
    coefs: list[float]
    r2: float
    """Share of the variance across brokers the fit explains (1.0 when the usage does not vary)."""
    residuals: list[float]

    @property
    def trusted(self) -> bool:
        return self.r2 >= MIN_R2 and any(c > 0 for c in self.coefs)


def _nonneg_fit(ys: Sequence[float], xs: Sequence[Sequence[float]]) -> tuple[float, list[float]]:
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
        if a < 0:  # a negative base is not physical: refit through the origin, dropping negative features
            if intercept:
                sub = _nonneg_fit_origin(ys, cols)
                coefs = sub
            a = 0.0
        full = [0.0] * k
        for i, j in enumerate(active):
            full[j] = coefs[i]
        return a, full


def _nonneg_fit_origin(ys: Sequence[float], cols: Sequence[Sequence[float]]) -> list[float]:
    """Least squares through the origin with non-negative coefficients (a negative one is dropped, refit)."""
    k = len(cols[0]) if cols else 0
    active = list(range(k))
    while active:
        sub = [[r[j] for j in active] for r in cols]
        scales = [max((abs(r[i]) for r in sub), default=0.0) or 1.0 for i in range(len(active))]
        rows = [[v / scales[i] for i, v in enumerate(r)] for r in sub]
        m = len(active)
        ata = [[sum(r[i] * r[j] for r in rows) + (1e-9 if i == j else 0.0) for j in range(m)] for i in range(m)]
        aty = [sum(r[i] * y for r, y in zip(rows, ys)) for i in range(m)]
        sol = _solve(ata, aty)
        if sol is None:
            active = active[:1] if len(active) > 1 else []
            continue
        coefs = [sol[i] / scales[i] for i in range(m)]
        if any(c < 0 for c in coefs):
            active = [j for j, c in zip(active, coefs) if c >= 0]
            continue
        out = [0.0] * k
        for i, j in enumerate(active):
            out[j] = coefs[i]
        return out
    return [0.0] * k


def _residuals(ys: Sequence[float], xs: Sequence[Sequence[float]], a: float, full: Sequence[float]) -> list[float]:
    return [y - a - sum(c * x[j] for j, c in enumerate(full)) for y, x in zip(ys, xs)]


def fit_detail(ys: Sequence[float], xs: Sequence[Sequence[float]]) -> Fit:
    """The non-negative fit with its explained variance and residuals (see :func:`fit_resource`).

    Robust to a few brokers the shape does not describe (a queue near saturation, a slower CPU, background
    work): with at least :data:`TRIM_MIN_BROKERS` brokers, those whose residual lies more than
    :data:`TRIM_SIGMAS` robust sigmas from the median (at most a quarter of them, the farthest first) are left
    out and the rest refitted. One saturated broker reporting ten times its share would otherwise set every
    coefficient, and with it every other broker's predicted usage and the noise every move must beat. The
    explained variance is the inliers'; the residuals are every broker's, against the refitted shape."""
    n = len(ys)
    a, full = _nonneg_fit(ys, xs)
    residuals = _residuals(ys, xs, a, full)
    keep = list(range(n))
    if n >= TRIM_MIN_BROKERS:
        sigma = robust_sigma(residuals)
        mid = sorted(residuals)[n // 2]
        far = sorted(
            (i for i in range(n) if sigma > 0 and abs(residuals[i] - mid) > TRIM_SIGMAS * sigma),
            key=lambda i: -abs(residuals[i] - mid),
        )[: (n - 1) // 4]
        if far:
            out = set(far)
            keep = [i for i in range(n) if i not in out]
            a, full = _nonneg_fit([ys[i] for i in keep], [xs[i] for i in keep])
            residuals = _residuals(ys, xs, a, full)
    kept = [ys[i] for i in keep]
    m = len(kept)
    mean = sum(kept) / m if m else 0.0
    ss_tot = sum((y - mean) ** 2 for y in kept)
    if m >= 3 and ss_tot > 1e-12 * m * max(mean * mean, 1e-30):
        r2 = 1.0 - sum(residuals[i] ** 2 for i in keep) / ss_tot
    else:
        r2 = 1.0
    return Fit(a, full, r2, residuals)


def fit_resource(ys: Sequence[float], xs: Sequence[Sequence[float]]) -> tuple[float, list[float]]:
    """``y = a + sum(c_k x_k)`` with ``a, c_k >= 0`` (features with a negative fit are dropped; a negative
    intercept refits through the origin, again without negative coefficients)."""
    f = fit_detail(ys, xs)
    return f.intercept, f.coefs


def robust_sigma(values: Sequence[float]) -> float:
    """1.4826 x the median absolute deviation: the spread of ``values`` that a few outliers do not move."""
    if not values:
        return 0.0
    srt = sorted(values)
    med = srt[len(srt) // 2] if len(srt) % 2 else (srt[len(srt) // 2 - 1] + srt[len(srt) // 2]) / 2
    dev = sorted(abs(v - med) for v in values)
    mad = dev[len(dev) // 2] if len(dev) % 2 else (dev[len(dev) // 2 - 1] + dev[len(dev) // 2]) / 2
    return 1.4826 * mad


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


@dataclass(frozen=True, slots=True)
class ViewSnapshot:
    """A :class:`ClusterView`'s assignment at one point of a plan (:meth:`ClusterView.snapshot`)."""

    used: dict[str, list[float]]
    owned: dict[str, list[str]]
    bundles: dict[str, BundleLoad]
    owners: dict[str, str]


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
        previous: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
        usage_smoothing: float = 0.5,
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
        self.relief: dict[str, list[float]] = {}
        """Per clipped broker and resource, the share of a leaving bundle's contribution its usage loses."""
        self.lift: dict[str, float] = {}
        """Per lifted broker (:meth:`lift_to`), how much busier its reports showed it than it is planned."""
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
        # fit each resource across brokers: its shape (coefficients), intercept and noise
        self.coef, self.trusted, self.learned, noise = self._fit(reported, broker_feat, prior, smoothing)
        # one report is one sample: smooth each broker's reported usage across cycles (the change its traffic
        # explains is taken at once, the unexplained rest with weight ``usage_smoothing``), and measure the
        # noise from how far each new sample lands from that prediction
        self.temporal_noise = 0.0
        self.has_temporal = False
        if previous:
            innovations: list[list[float]] = [[] for _ in RESOURCES]
            for b in self.brokers:
                prev = previous.get(b)
                if prev is None:
                    continue
                prev_used, prev_feat = prev
                for i in range(5):
                    load_now = sum(c * f for c, f in zip(self.coef[i], broker_feat[b]))
                    load_then = sum(c * f for c, f in zip(self.coef[i], prev_feat))
                    if load_then <= 0 or abs(load_now - load_then) > MAX_SMOOTHED_CHANGE * max(load_now, load_then):
                        continue  # a restart, a drain, a burst: the new report is the only evidence
                    raw = reported[b][i]
                    if self.trusted[i]:  # the fit is in usage units: add what the change in traffic costs
                        predicted = max(0.0, prev_used[i] + load_now - load_then)
                    else:  # a shape only (remembered or proxy): the usage scales with the load
                        predicted = prev_used[i] * load_now / load_then
                    if self.limit[b][i] > 0:
                        innovations[i].append((raw - predicted) / self.limit[b][i])
                    reported[b][i] = predicted + usage_smoothing * (raw - predicted)
            if any(len(v) >= NOISE_FLOOR_BROKERS for v in innovations):
                # the spread of a smoothed estimate: sigma * sqrt(a / (2 - a)), sigma about the innovations'
                # spread / sqrt(1 + a / (2 - a)), i.e. innovations' spread * sqrt(a / 2)
                shrink = (usage_smoothing / 2.0) ** 0.5
                spreads = [
                    robust_sigma(v) * shrink * w
                    for v, w in zip(innovations, self.weights)
                    if w > 0 and len(v) >= NOISE_FLOOR_BROKERS
                ]
                self.temporal_noise = max(spreads, default=0.0)
                self.has_temporal = bool(spreads)
                self.coef, self.trusted, self.learned, noise = self._fit(reported, broker_feat, prior, smoothing)
        self.smoothed: dict[str, tuple[list[float], list[float]]] = {
            b: (list(reported[b]), list(broker_feat[b])) for b in self.brokers
        }
        """Per broker (smoothed usage per resource, summed features): what the planner remembers."""
        self.fit_noise = max((n * w for n, w in zip(noise, self.weights) if w > 0), default=0.0)
        """Robust spread of the reports around the one fitted model (usage fraction, weighted): the model's error,
        which counts each broker's persistent bias (a slower CPU, background work the traffic does not explain)."""
        self.noise = self.temporal_noise if self.has_temporal else self.fit_noise
        """What a move must beat: how far a broker's report lands from one sample to the next (its own history
        takes its persistent bias out); on a first cycle, with no history, the spread around the fit, an upper
        bound. A broker's usage is its own (smoothed) report either way, not the fit's prediction."""
        # the base that goes with the coefficients used (smoothed, remembered or proxy): the median over
        # brokers of what they leave unexplained (never negative; 0 for a proxy, Pulsar's attribution)
        intercepts = [0.0] * 5
        for i in range(5):
            if self.trusted[i] or (prior or {}).get(RESOURCES[i]):
                left = sorted(
                    reported[b][i] - sum(c * f for c, f in zip(self.coef[i], broker_feat[b])) for b in self.brokers
                )
                intercepts[i] = max(0.0, left[len(left) // 2]) if left else 0.0
        # per broker and resource, its usage per unit of fitted load: 1 where the broker agrees with the fit
        # within the noise, its own (bounded) where it clearly does not (a faster CPU, a queue near saturation)
        self.scale: dict[str, list[float]] = {}
        for b in self.brokers:
            sc = [1.0] * 5
            for i in range(5):
                fitted = sum(c * f for c, f in zip(self.coef[i], broker_feat[b]))
                explained = reported[b][i] - min(intercepts[i], reported[b][i])
                if not self.trusted[i]:
                    if fitted > 0:
                        sc[i] = explained / fitted if explained > 0 else 0.0
                    else:
                        sc[i] = self._median_scale(i, reported, broker_feat, intercepts)
                elif fitted > 0 and explained > 0:
                    lim = self.limit[b][i]
                    band = NOISE_BAND * noise[i] * lim if lim > 0 else 0.0
                    if abs(explained - fitted) > band:
                        sc[i] = min(max(explained / fitted, SCALE_BOUNDS[0]), SCALE_BOUNDS[1])
            self.scale[b] = sc
        # per resource, a typical broker's usage per unit of load: 1 for a trusted fit (the fit is one), the
        # median over the brokers with traffic for a proxy (Pulsar's attribution: usage per message)
        self.typical_scale = [
            1.0 if self.trusted[i] else self._median_scale(i, reported, broker_feat, intercepts) for i in range(5)
        ]
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
            cur = contribution(broker_feat[b], b)  # the sum of the bundles' contributions (last samples)
            plan = [0.0] * 5
            owned = self.owned[b]
            for name, s in d.last_stats.items():
                pf = planning_features(s, bundle_data.get(name), peaks.get(name))
                pvec = contribution(pf, b)
                for i in range(5):
                    plan[i] += pvec[i]
                self.bundles[name] = BundleLoad(
                    name, b, pvec, pf[0], pf[3], s.producer_count + s.consumer_count, s.topics, pf[1], pf[2]
                )
                owned.append(name)
            # base = what the bundles do not explain (never negative); planned usage = base + planned bundles
            self.used[b] = [max(0.0, reported[b][i] - cur[i]) + plan[i] for i in range(5)]

    def _fit(
        self,
        reported: Mapping[str, Sequence[float]],
        broker_feat: Mapping[str, Sequence[float]],
        prior: Mapping[str, Sequence[float]] | None,
        smoothing: float,
    ) -> tuple[list[list[float]], list[bool], dict[str, list[float]], list[float]]:
        """Per resource: the coefficients to use, whether the fit is trusted, the shapes to remember, and the
        capacity-normalised robust spread of the residuals."""
        coef: list[list[float]] = []
        trusted: list[bool] = []
        learned: dict[str, list[float]] = {}
        noise: list[float] = []
        for ri, r in enumerate(RESOURCES):
            idx = _FEATURES[r]
            ys = [reported[b][ri] for b in self.brokers]
            xs = [[broker_feat[b][j] for j in idx] for b in self.brokers]
            fit = fit_detail(ys, xs) if self.brokers else Fit(0.0, [0.0] * len(idx), 1.0, [])
            full = [0.0] * 5
            for j, v in zip(idx, fit.coefs):
                full[j] = v
            before = (prior or {}).get(r)
            if fit.trusted:
                if before is not None and any(before):  # one cycle's fit is noisy: smoothed across cycles (EMA)
                    full = [(1.0 - smoothing) * b + smoothing * v for b, v in zip(before, full)]
                learned[r] = full
            elif before is not None and any(before):
                full = list(before)  # the last good shape; the per-broker scale below sets the magnitude
                learned[r] = full
            else:
                full = list(PROXY[r])
            coef.append(full)
            trusted.append(fit.trusted)
            lims = [self.limit[b][ri] for b in self.brokers]
            normalised = [res / lim for res, lim in zip(fit.residuals, lims) if lim > 0]
            noise.append(robust_sigma(normalised) if len(normalised) >= NOISE_FLOOR_BROKERS else 0.0)
        return coef, trusted, learned, noise

    def _median_scale(
        self,
        i: int,
        reported: Mapping[str, Sequence[float]],
        broker_feat: Mapping[str, Sequence[float]],
        intercepts: Sequence[float],
    ) -> float:
        """For a broker with no traffic (nothing of its own to scale by), resource ``i``'s median usage
        per unit of load over the brokers that have some: what a bundle moved there is expected to cost."""
        vals = []
        for b in self.brokers:
            fitted = sum(c * f for c, f in zip(self.coef[i], broker_feat[b]))
            explained = reported[b][i] - min(intercepts[i], reported[b][i])
            if fitted > 0 and explained > 0:
                vals.append(explained / fitted)
        if not vals:
            return 0.0
        vals.sort()
        return vals[len(vals) // 2]

    def coefficients(self) -> dict[str, list[float]]:
        """Per resource the shape to remember for the next cycle (feature order of :func:`features_of`):
        only shapes learned from a trusted fit (a proxy is never remembered)."""
        return {r: list(c) for r, c in self.learned.items()}

    def contribution(self, f: Sequence[float], broker: str | None = None) -> list[float]:
        """A bundle's absolute contribution per resource (0 for resources with weight 0), at ``broker``'s
        usage per unit of load (the cluster's fit when None)."""
        out = [0.0, 0.0, 0.0, 0.0, 0.0]
        sc = self.scale.get(broker) if broker is not None else None
        for i, terms in self._sparse:
            v = 0.0
            for j, c in terms:
                v += c * f[j]
            out[i] = v * sc[i] if sc is not None else v
        return out

    def usage_of(self, used: Sequence[float], limit: Sequence[float]) -> float:
        best = 0.0
        for u, lim, w in zip(used, limit, self.weights):
            if lim > 0 and w > 0:
                v = w * u / lim
                if v > best:
                    best = v
        return best

    def smoothed_usage(self, broker: str) -> float:
        """The usage of ``broker``'s load reports, smoothed across cycles as the model reads them (weighted max
        over resources): its planned usage without its bundles' remembered peaks or the clip."""
        return self.usage_of(self.smoothed[broker][0], self.limit[broker])

    def reported_usage(self, data: LocalBrokerData) -> float:
        """The usage a broker's own load report shows (weighted max over resources, as reported: no model)."""
        res = (data.cpu, data.memory, data.direct_memory, data.bandwidth_in, data.bandwidth_out)
        return self.usage_of([r.usage for r in res], [r.limit for r in res])

    def clip(self, broker: str, level: float) -> None:
        """Lower ``broker``'s planned usage to at most ``level``: each counted resource's use to ``level``'s
        share of its limit. The model over-stated that broker, so it over-states its bundles there too: a
        bundle leaving it relieves it only in proportion (``level / modelled`` per resource), while the
        same bundle arriving elsewhere still counts in full. Both errors point the safe way: the source is
        not believed emptier than its reports can show, the destination not lighter than the model says."""
        used = self.used[broker]
        relief = self.relief.setdefault(broker, [1.0] * 5)
        for i, k in self._scale[broker]:
            if used[i] * k > level:
                relief[i] *= level / (used[i] * k)
                used[i] = level / k
        self._usage.pop(broker, None)

    def lift_to(self, broker: str, level: float) -> bool:
        """As a destination, ``broker`` is at least at ``level``: what arrives there lands on top of that
        (:meth:`landing`). Its usage as a source is unchanged. For a broker whose load swings and that the
        model plans emptier than its reports showed it in its busy phase, and for a broker :meth:`clip`
        lowered to its reports (as a destination it stays as busy as the model put it). Returns whether
        this raised its level (a lift only ever rises)."""
        gap = level - self.usage(broker)
        if gap > self.lift.get(broker, 0.0):
            self.lift[broker] = gap
            return True
        return False

    def as_destination(self, broker: str) -> float:
        """``broker``'s usage as a destination before anything arrives: :meth:`usage`, lifted."""
        return self.usage(broker) + self.lift.get(broker, 0.0)

    def landing(self, broker: str, vec: Sequence[float]) -> float:
        """Usage of ``broker`` as a destination once ``vec`` arrives: :meth:`usage_after`, lifted
        (:meth:`lift_to`)."""
        return self.usage_after(broker, vec, 1.0) + self.lift.get(broker, 0.0)

    def clipped(self, broker: str) -> bool:
        """Whether the reports contradicted the model on ``broker`` (:meth:`clip` lowered it)."""
        return broker in self.relief

    def usage(self, broker: str) -> float:
        """Capacity-normalised usage now (cached; moves and splits refresh it)."""
        u = self._usage.get(broker)
        if u is None:
            used = self.used[broker]
            u = self._usage[broker] = max((used[i] * k for i, k in self._scale[broker]), default=0.0)
        return u

    def usage_after(self, broker: str, vec: Sequence[float], sign: float) -> float:
        """Usage of ``broker`` if ``vec`` were added (sign 1) or removed (sign -1; from a clipped broker in
        proportion, :meth:`clip`)."""
        used = self.used[broker]
        relief = self.relief.get(broker)
        if sign < 0 and relief is not None:
            return max(((used[i] - vec[i] * relief[i]) * k for i, k in self._scale[broker]), default=0.0)
        return max(((used[i] + sign * vec[i]) * k for i, k in self._scale[broker]), default=0.0)

    def usage_without(self, broker: str, names: Sequence[str]) -> float:
        """Usage of ``broker`` with the bundles ``names`` removed (:meth:`usage_after` of their summed load):
        what it would carry if only its other bundles stayed."""
        total = [sum(self.bundles[n].vec[i] for n in names) for i in range(5)]
        return self.usage_after(broker, total, -1.0)

    def arrival(self, vec: Sequence[float], source: str, dest: str) -> list[float]:
        """What ``vec`` (a contribution at ``source``'s usage per unit of load) costs on ``dest``.

        Where ``source`` reports more per unit of load than both the cluster's fit and ``dest`` (a queue near
        saturation, a slower CPU), the load arrives at ``dest``'s own rate, at least a typical broker's (the
        fit's for a trusted fit, the median broker's for a proxy); otherwise it counts as at the source. Never
        more than at the source: a bundle off a saturated broker is not believed to bring that broker's
        queueing along, and nothing is believed cheaper than a typical broker makes it."""
        ss = self.scale.get(source)
        sd = self.scale.get(dest)
        if ss is None or sd is None:
            return list(vec)
        out = list(vec)
        for i in range(5):
            d = max(sd[i], self.typical_scale[i])
            if ss[i] > d > 0:
                out[i] = vec[i] * d / ss[i]
        return out

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
        """Move ``bundle`` to ``dest``: it leaves its source (in proportion when clipped) and arrives at
        :meth:`arrival` (a new :class:`BundleLoad`, so that a :meth:`snapshot` keeps the one before)."""
        bl = self.bundles[bundle]
        src = bl.broker
        relief = self.relief.get(src)
        arrived = self.arrival(bl.vec, src, dest)
        for i, v in enumerate(bl.vec):
            self.used[src][i] -= v if relief is None else v * relief[i]
            self.used[dest][i] += arrived[i]
        self.owned[src].remove(bundle)
        self.owned[dest].append(bundle)
        if arrived != bl.vec:
            bl = self.bundles[bundle] = dataclasses.replace(bl, vec=arrived)
        bl.broker = dest
        self._usage.pop(src, None)
        self._usage.pop(dest, None)

    def snapshot(self) -> ViewSnapshot:
        """What moves and splits change, for :meth:`restore`: a plan tried and dropped."""
        return ViewSnapshot(
            {b: list(v) for b, v in self.used.items()},
            {b: list(v) for b, v in self.owned.items()},
            dict(self.bundles),
            {name: bl.broker for name, bl in self.bundles.items()},
        )

    def restore(self, snap: ViewSnapshot) -> None:
        """Undo every move and split since ``snap`` was taken (in place: references to ``owned`` stay valid)."""
        for b, v in snap.used.items():
            self.used[b][:] = v
        for b, names in snap.owned.items():
            self.owned[b][:] = names
        self.bundles.clear()
        self.bundles.update(snap.bundles)
        for name, broker in snap.owners.items():
            self.bundles[name].broker = broker
        self._usage.clear()

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


__all__ = [
    "RESOURCES",
    "BundleLoad",
    "ClusterView",
    "ViewSnapshot",
    "Fit",
    "fit_detail",
    "fit_resource",
    "planning_features",
    "robust_sigma",
    "stats_features",
]
