"""Split-to-fit: cut a bundle no move can place into parts the least-used brokers have room for.

Used by the :class:`~.goals.SplitToFit` goal. A bundle is split by its topics' hashes - isolating a
topic that carries more than half of it (boundaries at its hash and hash+1), otherwise into parts each
sized to the room one of the least-used brokers has below the target (:func:`fitted_parts`) - or, with
no topic rates, in two equal halves (``range_equally_divide``). The split is Pulsar's
``specified_positions_divide`` at the planned boundaries (:func:`planned_split`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pulsar_rebalance.core.decision import SplitDecision
from pulsar_rebalance.core.guard import DestinationRoom
from pulsar_rebalance.core.planner.load_model import BundleLoad, ClusterView, features_of
from pulsar_rebalance.core.pulsar.bundles import (
    BundleRange,
    bundle_full_name,
    format_boundary,
    split_full_name,
    split_range,
    topic_hash,
)
from pulsar_rebalance.core.pulsar.config import LoadBalancerConfig

if TYPE_CHECKING:  # global_planner imports this module
    from pulsar_rebalance.core.planner.global_planner import PlannerInput, PlannerSettings

TopicLoad = tuple[int, list[float], tuple[float, float, float]]
"""A topic of a bundle being split: its hash, its load vector, and its planned (msg/s, bytes/s in, out)."""


def planned_split(
    bundle: str, broker: str, reason: str, points: Sequence[int], children: Sequence[str]
) -> SplitDecision:
    """A planner's split: Pulsar's ``specified_positions_divide`` at the planned boundaries, children
    named (so unloads of the same plan can name them) and not unloaded by the split itself."""
    return SplitDecision(
        bundle,
        broker,
        reason,
        "specified_positions_divide",
        [format_boundary(b) for b in points],
        list(children),
        False,
    )


def fitted_parts(
    st: PlannerSettings,
    view: ClusterView,
    bl: BundleLoad,
    topic_loads: Sequence[TopicLoad],
    rng: BundleRange,
    dests: Sequence[str],
    target: float,
    excess: float,
    room: DestinationRoom | None = None,
) -> tuple[list[int], list[str | None]]:
    """Cut the bundle (its topics in hash order) into parts to move, each sized to the room a
    destination has below the target, and parts that stay: the fewest parts to move whose load
    covers the source's ``excess``. Returns the split points and, per child, its destination
    (None: stays on the source). Each part then moves in one move and no destination goes above
    the target - fewer moves than equal parts that fit nowhere and push their destinations over
    (which then shed in turn).

    For m parts, each at most the m-th largest room R, the most load m disjoint runs of topics
    can carry is a dynamic programme over the topics (the best run ending at a topic is the longest
    one within R); m grows until that covers the excess (at most ``max_split_parts - 1`` parts).

    A destination's room is also what the do-no-harm guard (``room``) will let it take: the guard
    predicts a part by its share of the source's reported usage, which can be larger than this
    model's estimate (CPU the model puts on topics rather than messages); a part sized only for the
    model's room would then be cut with its split. The guard's points are converted to the model's
    by the ratio of the two estimates for the whole bundle on the least-used destination."""
    n = len(topic_loads)
    rooms = sorted((d for d in dests if view.as_destination(d) < target), key=lambda d: (view.as_destination(d), d))
    if n < 2 or not rooms:
        return [], []
    ref = rooms[0]
    size = [view.usage_after(ref, view.arrival(v, bl.broker, ref), 1.0) - view.usage(ref) for _, v, _f in topic_loads]
    prefix = [0.0]
    for x in size:
        prefix.append(prefix[-1] + x)
    eff = {d: target - view.as_destination(d) for d in rooms}
    if room is not None and prefix[-1] > 0:
        whole = (
            sum(f[0] for *_, f in topic_loads),
            sum(f[1] for *_, f in topic_loads),
            sum(f[2] for *_, f in topic_loads),
        )
        ratio = room.added(bl.broker, ref, whole) / prefix[-1]
        if ratio > 0:
            eff = {d: min(r, room.room(d) / ratio) for d, r in eff.items()}
    rooms = sorted((d for d in rooms if eff[d] > 0), key=lambda d: (-eff[d], view.as_destination(d), d))
    if not rooms:
        return [], []
    best: tuple[float, list[tuple[int, int]]] | None = None
    for m in range(1, min(st.max_split_parts - 1, len(rooms)) + 1):
        cap = eff[rooms[m - 1]]
        # f[k][i]: most load k runs can carry among topics[:i]; run ends at i-1 and starts at lo[i]
        lo = [0] * (n + 1)
        j = 0
        for i in range(1, n + 1):
            while j < i and prefix[i] - prefix[j] > cap + 1e-12:
                j += 1
            lo[i] = j
        prev = [0.0] * (n + 1)
        back: list[list[int]] = []
        for _ in range(m):
            cur = [0.0] * (n + 1)
            choice = [-1] * (n + 1)
            for i in range(1, n + 1):
                cur[i], choice[i] = cur[i - 1], -1
                if lo[i] < i:
                    v = prev[lo[i]] + prefix[i] - prefix[lo[i]]
                    if v > cur[i] + 1e-15:
                        cur[i], choice[i] = v, lo[i]
            back.append(choice)
            prev = cur
        runs: list[tuple[int, int]] = []
        i, k = n, m - 1
        while i > 0 and k >= 0:
            if back[k][i] < 0:
                i -= 1
                continue
            runs.append((back[k][i], i))
            i, k = back[k][i], k - 1
        runs.reverse()
        covered = sum(prefix[b] - prefix[a] for a, b in runs)
        if best is None or covered > best[0] + 1e-12:
            best = (covered, runs)
        if covered >= excess:
            break
    if best is None:
        return [], []
    runs = [r for r in best[1] if r[1] > r[0]]
    if not runs or (len(runs) == 1 and runs[0] == (0, n)):
        return [], []
    # the biggest part to the roomiest destination, each part checked against its destination
    order = sorted(range(len(runs)), key=lambda r: -(prefix[runs[r][1]] - prefix[runs[r][0]]))
    free = list(rooms)
    dest_of: dict[int, str | None] = {}
    for r in order:
        a, b = runs[r]
        vec = [sum(topic_loads[t][1][i] for t in range(a, b)) for i in range(5)]
        traffic = (
            sum(topic_loads[t][2][0] for t in range(a, b)),
            sum(topic_loads[t][2][1] for t in range(a, b)),
            sum(topic_loads[t][2][2] for t in range(a, b)),
        )
        d = next(
            (
                x
                for x in free
                if view.landing(x, view.arrival(vec, bl.broker, x)) <= target
                and (room is None or room.fits(bl.broker, x, traffic))
            ),
            None,
        )
        dest_of[r] = d
        if d is not None:
            free.remove(d)
    # children: moved runs and the stretches between them (which stay)
    cuts: list[tuple[int, str | None]] = []  # (start index, destination)
    pos = 0
    for r, (a, b) in enumerate(runs):
        if a > pos:
            cuts.append((pos, None))
        cuts.append((a, dest_of[r]))
        pos = b
    if pos < n:
        cuts.append((pos, None))
    # a cut must fall strictly between two topic hashes and inside the range; else the parts merge (and stay)
    merged: list[list[Any]] = []
    for start, d in cuts:
        h = topic_loads[start][0]
        if merged and not (topic_loads[start - 1][0] < h and rng.lower < h < rng.upper):
            merged[-1][1] = None
            continue
        merged.append([start, d])
    if len(merged) < 2:
        return [], []
    return [topic_loads[c[0]][0] for c in merged[1:]], [c[1] for c in merged]


def split_bundle(
    st: PlannerSettings,
    view: ClusterView,
    bundle: str,
    inp: PlannerInput,
    config: LoadBalancerConfig,
    counts: dict[str, int],
    target: float,
    warnings: list[str],
    topic_cache: dict[str, list[TopicLoad]],
    child_features: dict[str, tuple[float, float, float]],
    dests: Sequence[str] = (),
    excess: float = 0.0,
    placements: dict[str, str] | None = None,
    room: DestinationRoom | None = None,
) -> SplitDecision | None:
    """Split ``bundle`` (see the module docstring); ``placements`` receives the destination planned
    for each child that is to move (room-fitted parts)."""
    placements = {} if placements is None else placements
    bl = view.bundles[bundle]
    ns, range_name = split_full_name(bundle)  # ns is namespace_of(bundle)
    rng = BundleRange.parse(range_name, bundle)
    limit = config.load_balancer_namespace_maximum_bundles
    topic_loads: list[TopicLoad] | None = topic_cache.get(bundle)
    if topic_loads is None and (inp.bundle_topics or {}).get(bundle):
        raw = sorted(
            (topic_hash(topic), (r.msg_rate, r.msg_throughput_in, r.msg_throughput_out))
            for topic, r in inp.bundle_topics[bundle].items()  # type: ignore[index]
        )
        planned = (bl.msg_rate, bl.feat_in, bl.feat_out)
        tot = [sum(f[k] for _, f in raw) for k in range(3)]
        if any(planned[k] > (1 + st.swing) * tot[k] + 1e-9 for k in range(3)):
            # planned at a peak its topics do not show now (an on/off consumer in its off phase): which
            # topic carries the peak is not known, and a part sized by today's rates may take the whole
            # peak to its destination. Split when the peak shows in the topics' rates.
            warnings.append(
                f"{bundle}: its traffic swings (planned at its recent peak of {planned[0]:.0f} msg/s, its topics now "
                f"carry {tot[0]:.0f} msg/s): which topic carries the peak is not known now, not split in this plan"
            )
            return None
        # the topics' current rates, scaled to the rates the bundle is planned at (its recent peak)
        k3 = [planned[k] / tot[k] if tot[k] > 0 else 0.0 for k in range(3)]
        topic_loads = []
        for h, f in raw:
            scaled = (f[0] * k3[0], f[1] * k3[1], f[2] * k3[2])
            topic_loads.append((h, view.contribution(features_of(*scaled, 1), bl.broker), scaled))
    if topic_loads == [] and bundle in topic_cache:
        warnings.append(f"{bundle}: a child of a split made without topic rates; not split again in this plan")
        return None
    if bl.topics <= 1 or (topic_loads is not None and len(topic_loads) == 1):
        warnings.append(
            f"{bundle} on {bl.broker}: a single hot topic carries it; Pulsar splits a bundle only between topics, "
            "so no split can spread it"
        )
        return None
    if not rng.can_split():
        warnings.append(f"{bundle}: range cannot be split further")
        return None
    points: list[int]
    part_dests: list[str | None] = []
    how: str
    if topic_loads:
        size = [view.usage_of(v, view.limit[bl.broker]) for _, v, _f in topic_loads]
        total = sum(size) or 1.0
        top = max(range(len(size)), key=lambda i: size[i])
        if size[top] > 0.5 * total:
            if total - size[top] < st.min_split_gain:
                warnings.append(
                    f"{bundle} on {bl.broker}: one topic carries {size[top] / total:.0%} of it; isolating it would free only "
                    f"{total - size[top]:.4f} of {bl.broker} (< {st.min_split_gain}): not split (no split can spread one topic)"
                )
                return None
            h = topic_loads[top][0]
            points = [p for p in (h, h + 1) if rng.lower < p < rng.upper]
            how = f"isolate its hottest topic ({size[top] / total:.0%} of the bundle) at hash {format_boundary(h)}"
        else:
            points, part_dests = fitted_parts(st, view, bl, topic_loads, rng, dests, target, excess, room)
            how = (
                f"{len(points) + 1} parts by topic hash, each part to move sized to the room one of the "
                f"least-used brokers has below the target"
            )
    else:
        mid = rng.lower + (rng.upper - rng.lower) // 2
        points = [mid]
        how = "no topic rates given: range_equally_divide (load assumed even)"
    if not points:
        warnings.append(f"{bundle}: no split boundary separates its load; left as it is")
        return None
    if counts.get(ns, 0) + len(points) > limit:
        warnings.append(
            f"{bundle}: namespace {ns} has {counts.get(ns, 0)} bundles; splitting into {len(points) + 1} would exceed "
            f"loadBalancerNamespaceMaximumBundles={limit}"
        )
        return None
    children_ranges = split_range(rng, boundaries=points)
    children: list[BundleLoad] = []
    child_names = [bundle_full_name(ns, c.name) for c in children_ranges]
    if topic_loads:
        sums = []
        for c, child in zip(children_ranges, child_names):
            vec = [0.0] * 5
            mine = [t for t in topic_loads if c.contains(t[0])]
            topic_cache[child] = mine
            for _, v, _f in mine:
                for i in range(5):
                    vec[i] += v[i]
            sums.append(vec)
        tot = [sum(v[i] for v in sums) for i in range(5)]
        scale = [bl.vec[i] / tot[i] if tot[i] > 0 else 0.0 for i in range(5)]
        vecs = [[v[i] * scale[i] for i in range(5)] for v in sums]
    else:
        vecs = [[x / len(children_ranges) for x in bl.vec] for _ in children_ranges]
    n = len(children_ranges)
    for child, vec in zip(child_names, vecs):
        if topic_loads:  # msg/s and bytes/s of the topics hashing into the child
            feats = [f for _, _, f in topic_cache[child]]
            child_features[child] = (sum(f[0] for f in feats), sum(f[1] for f in feats), sum(f[2] for f in feats))
        else:
            child_features[child] = (bl.msg_rate / n, bl.feat_in / n, bl.feat_out / n)
        k = len(topic_cache[child]) if child in topic_cache else max(1, bl.topics // n)
        rate, tin, tout = child_features[child]
        children.append(BundleLoad(child, bl.broker, vec, rate, tin + tout, bl.clients // n, k, tin, tout))
    for child, d in zip(child_names, part_dests):
        if d is not None:
            placements[child] = d
    if not topic_loads:
        for child in child_names:  # no topic rates: do not split a guessed half again in this plan
            topic_cache[child] = []
    view.replace_bundle(bundle, children)
    counts[ns] = counts.get(ns, 0) + len(points)
    reason = f"GlobalPlanner: {bundle} fits on no broker below target {target:.4f}; split to {how}; children placed in this plan"
    return planned_split(bundle, bl.broker, reason, points, [ch.name for ch in children])


__all__ = ["TopicLoad", "fitted_parts", "planned_split", "split_bundle"]
