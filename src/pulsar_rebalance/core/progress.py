"""Progress and ETA of a plan's execution (pure: no I/O; the executor's log, the plan page and
``plans show`` print what :func:`progress_lines` returns).

Inputs are the stored action rows (kind, state, ``started_at`` / ``finished_at``, the load each unload
carried at planning time: ``predicted.bundleLoad``), the run's pacing parameters and ``now``. The
duration of an action is ``finished_at - started_at`` of its row: the executor stamps ``started_at``
when it commits the intent (after taking the per-broker slots, right before the admin call) and
``finished_at`` with the outcome, so nothing else is stored for it.

**How the ETA is computed** (seconds from ``now``, :func:`plan_progress`):

* ``d_split``, ``d_unload``: the median measured duration of this plan's *completed* actions of that
  kind (reconciled ones excluded: their ``started_at`` is an earlier attempt's). Before one has
  finished: :data:`DEFAULT_SECONDS` (split 2 s, unload 5 s: an unload's admin call returns once the
  bundle is closed on the source and assigned, typically 1-5 s).
* ``pause`` = ``unload_pacing_seconds``: after each completed action (split or unload) its worker waits
  that long before the next one, so each action costs ``d + pause`` of its worker's time.
* Splits run one at a time, before any unload::

      splits = sum over in-progress splits of (max(0, d_split - elapsed) + pause)
             + pending splits * (d_split + pause)

* Unloads: ``n`` = the pending unloads that still start in this run, in plan order: all of them, or
  with ``max_unloads_per_run = C`` at most ``C - started``, ``started`` being the unloads that are
  no longer pending, except those skipped by the cap (a resumed execution counts from zero again:
  the estimate then undercounts what may still run). The pending ones beyond that are *deferred*:
  the executor skips them ("max_unloads_per_run=C reached") and they wait for the next run; they are
  not in the ETA. They run ``max_parallel_unloads`` at a time and at most ``max_unloads_per_broker``
  from or to one broker::

      waves   = max(ceil(n / max_parallel_unloads),
                    max over brokers b of ceil(n_b / max_unloads_per_broker))   # n_b: of the n, from or to b
      unloads = max over in-progress unloads of (max(0, d_unload - elapsed) + pause)   # 0 if none
              + waves * (d_unload + pause)

  (cautious: pending unloads are counted as starting once every in-flight one has finished).
* ``ETA = splits + unloads``: 0 once nothing is pending or in progress; ``None`` while a stop is
  requested (no further action starts). Not counted: each action's pre-checks (stop switch, drift read
  from Pulsar) and the re-read of the cluster after the last action.

A finished execution reports ``elapsed``: from the first action's start to the last one's end.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from statistics import median
from typing import Any

from pulsar_rebalance.core.lifecycle import TRANSITIONS, PlanStatus
from pulsar_rebalance.core.plan_summary import BundleTraffic

DEFAULT_SECONDS: Mapping[str, float] = {"split": 2.0, "unload": 5.0}
"""An action's assumed duration before one of its kind has finished in this plan."""

CAP_REACHED_PREFIX = "max_unloads_per_run="

PROGRESS_STATUSES: tuple[PlanStatus, ...] = ("approved", "executing", *sorted(TRANSITIONS["executing"]))
"""The plan statuses that have a progress section (plan page, ``plans show``): about to run, running, or run."""


def cap_reached(cap: int) -> str:
    """Why the executor skips an unload beyond the per-run cap (what :class:`ActionProgress` recognises)."""
    return f"{CAP_REACHED_PREFIX}{cap} reached"


@dataclass(frozen=True)
class Pacing:
    """The execution parameters the ETA depends on (the DAG params of the same names)."""

    max_parallel_unloads: int = 4
    max_unloads_per_broker: int = 2
    max_unloads_per_run: int | None = None
    unload_pacing_seconds: float = 0.0

    @classmethod
    def of(cls, params: Mapping[str, Any] | None) -> Pacing:
        """From a run's params JSON (missing or malformed keys: the defaults)."""
        p = params or {}

        def count(key: str, default: int | None) -> int | None:
            v = p.get(key, default)
            return v if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else default

        pause = p.get("unload_pacing_seconds", 0.0)
        return cls(
            max_parallel_unloads=count("max_parallel_unloads", cls.max_parallel_unloads) or 1,
            max_unloads_per_broker=count("max_unloads_per_broker", cls.max_unloads_per_broker) or 1,
            max_unloads_per_run=count("max_unloads_per_run", None),
            unload_pacing_seconds=float(pause) if isinstance(pause, (int, float)) and pause >= 0 else 0.0,
        )


@dataclass(frozen=True)
class ActionProgress:
    """One action as progress needs it."""

    seq: int
    kind: str  # split | unload
    state: str  # pending | in_progress | completed | failed | skipped
    bundle: str = ""
    source: str | None = None
    destination: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    msg_rate: float | None = None  # in + out, msg/s, at planning time (unloads)
    msg_throughput: float | None = None  # in + out, bytes/s
    reconciled: bool = False  # completed by reconciling an earlier attempt: no measured duration
    capped: bool = False  # skipped by max_unloads_per_run: waits for the next run

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> ActionProgress:
        """From a stored action row (``seq``, ``kind``, ``state``, ``bundle``, ``source_broker``,
        ``destination_broker``, ``started_at``, ``finished_at``, ``predicted``, ``result``, ``error``)."""
        traffic = BundleTraffic.from_predicted(row.get("predicted"))
        state = str(row.get("state") or "pending")
        return cls(
            seq=int(row.get("seq") or 0),
            kind=str(row.get("kind") or "unload"),
            state=state,
            bundle=str(row.get("bundle") or ""),
            source=row.get("source_broker"),
            destination=row.get("destination_broker"),
            started_at=row.get("started_at"),
            finished_at=row.get("finished_at"),
            msg_rate=traffic.msg_rate,
            msg_throughput=traffic.msg_throughput,
            reconciled=bool((row.get("result") or {}).get("reconciled")),
            capped=state == "skipped" and str(row.get("error") or "").startswith(CAP_REACHED_PREFIX),
        )

    @property
    def seconds(self) -> float | None:
        """Measured duration of a completed action (not a reconciled one)."""
        if self.state != "completed" or self.reconciled or self.started_at is None or self.finished_at is None:
            return None
        return max(0.0, (self.finished_at - self.started_at).total_seconds())


@dataclass(frozen=True)
class Progress:
    total: int
    completed: int
    failed: int
    skipped: int
    in_progress: int
    pending: int
    deferred: int  # unloads the per-run cap keeps out of this run (pending beyond it, or skipped by it)
    moved_msg_rate: float  # completed unloads' msg/s (in + out)
    moved_throughput: float  # completed unloads' bytes/s
    planned_msg_rate: float  # every unload's
    planned_throughput: float
    traffic_unknown: bool  # some unload recorded no load: the sums are lower bounds
    median_seconds: Mapping[str, float]  # per kind, measured only
    measured: Mapping[str, int]  # how many durations each median is of
    eta_seconds: float | None  # None: stopping
    elapsed_seconds: float | None  # first start (or end) to now, or to the last end once finished
    pacing: Pacing
    status: str | None = None  # the plan's status, when known
    stopping: bool = False

    @property
    def finished(self) -> int:
        """Actions in a final state."""
        return self.completed + self.failed + self.skipped

    @property
    def running(self) -> bool:
        """Something is left to do (pending or in progress)."""
        return bool(self.pending or self.in_progress)


def plan_progress(
    actions: Iterable[ActionProgress],
    pacing: Pacing,
    now: datetime,
    *,
    status: str | None = None,
    stopping: bool = False,
) -> Progress:
    """Counts, traffic moved so far vs planned, median durations and the ETA (see the module docstring)."""
    acts = sorted(actions, key=lambda a: a.seq)
    by_state = {
        s: sum(a.state == s for a in acts) for s in ("pending", "in_progress", "completed", "failed", "skipped")
    }
    unloads = [a for a in acts if a.kind == "unload"]
    done_unloads = [a for a in unloads if a.state == "completed"]
    durations: dict[str, list[float]] = {}
    for a in acts:
        if a.seconds is not None:
            durations.setdefault(a.kind, []).append(a.seconds)
    medians = {k: float(median(v)) for k, v in sorted(durations.items())}
    d = {k: medians.get(k, DEFAULT_SECONDS[k]) for k in DEFAULT_SECONDS}
    pause = pacing.unload_pacing_seconds

    pending_unloads = [a for a in unloads if a.state == "pending"]
    runnable = pending_unloads
    if pacing.max_unloads_per_run is not None:
        started = sum(a.state != "pending" and not a.capped for a in unloads)
        runnable = pending_unloads[: max(0, pacing.max_unloads_per_run - started)]
    deferred = len(pending_unloads) - len(runnable) + sum(a.capped for a in unloads)

    def left(a: ActionProgress) -> float:  # an in-flight action's remaining time, its pause included
        elapsed = (now - a.started_at).total_seconds() if a.started_at else 0.0
        return max(0.0, d[a.kind] - elapsed) + pause

    eta: float | None = None
    if not stopping:
        splits = [a for a in acts if a.kind == "split"]
        eta = sum(left(a) for a in splits if a.state == "in_progress")
        eta += sum(a.state == "pending" for a in splits) * (d["split"] + pause)
        eta += max((left(a) for a in unloads if a.state == "in_progress"), default=0.0)
        eta += _waves(runnable, pacing) * (d["unload"] + pause)

    starts = [t for a in acts for t in (a.started_at or a.finished_at,) if t is not None]
    ends = [a.finished_at for a in acts if a.finished_at is not None]
    still = by_state["pending"] or by_state["in_progress"]
    elapsed = None
    if starts:
        end = now if still or not ends else max(ends)
        elapsed = max(0.0, (end - min(starts)).total_seconds())
    return Progress(
        total=len(acts),
        completed=by_state["completed"],
        failed=by_state["failed"],
        skipped=by_state["skipped"],
        in_progress=by_state["in_progress"],
        pending=by_state["pending"],
        deferred=deferred,
        moved_msg_rate=sum(a.msg_rate or 0.0 for a in done_unloads),
        moved_throughput=sum(a.msg_throughput or 0.0 for a in done_unloads),
        planned_msg_rate=sum(a.msg_rate or 0.0 for a in unloads),
        planned_throughput=sum(a.msg_throughput or 0.0 for a in unloads),
        traffic_unknown=any(a.msg_rate is None or a.msg_throughput is None for a in unloads),
        median_seconds=medians,
        measured={k: len(v) for k, v in sorted(durations.items())},
        eta_seconds=eta,
        elapsed_seconds=elapsed,
        pacing=pacing,
        status=status,
        stopping=stopping,
    )


def _waves(runnable: Sequence[ActionProgress], pacing: Pacing) -> int:
    """How many rounds of parallel unloads ``runnable`` needs (parallelism and per-broker limits)."""
    if not runnable:
        return 0
    per_broker: dict[str, int] = {}
    for a in runnable:
        for b in {x for x in (a.source, a.destination) if x}:
            per_broker[b] = per_broker.get(b, 0) + 1
    busiest = max(per_broker.values(), default=0)
    return max(
        math.ceil(len(runnable) / pacing.max_parallel_unloads), math.ceil(busiest / pacing.max_unloads_per_broker)
    )


# ------------------------------------------------------------------------------------ wording


def duration(seconds: float) -> str:
    """``1.9 s``, ``42 s``, ``2 min 10 s``, ``1 h 5 min``."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min" + (f" {s % 60} s" if s % 60 else "")
    return f"{s // 3600} h" + (f" {s % 3600 // 60} min" if s % 3600 // 60 else "")


def msg_rate(x: float) -> str:
    return f"{x:,.0f} msg/s" if x >= 10 or x == 0 else f"{x:,.1f} msg/s"


def throughput(x: float) -> str:
    """Bytes per second in binary units (as Pulsar's dashboards show throughput)."""
    for unit, size in (("GiB/s", 2**30), ("MiB/s", 2**20), ("KiB/s", 2**10)):
        if x >= size:
            v = x / size
            return f"{v:,.0f} {unit}" if v >= 10 else f"{v:.1f} {unit}"
    return f"{x:,.0f} B/s"


def moved_line(p: Progress) -> str:
    """``moved 4,200 msg/s, 38 MiB/s of 12,600 msg/s, 114 MiB/s planned``."""
    at_least = " (at least: some unload recorded no load)" if p.traffic_unknown else ""
    return (
        f"moved {msg_rate(p.moved_msg_rate)}, {throughput(p.moved_throughput)} of "
        f"{msg_rate(p.planned_msg_rate)}, {throughput(p.planned_throughput)} planned{at_least}"
    )


def eta_text(p: Progress) -> str:
    """``ETA 2 min 10 s``, ``finished in 3 min 2 s``, or what stands in for them."""
    cap = p.pacing.max_unloads_per_run
    later = (
        f"; {p.deferred} unload{'s' if p.deferred != 1 else ''} wait{'s' if p.deferred == 1 else ''} for the next run "
        f"(max_unloads_per_run={cap})"
        if p.deferred
        else ""
    )
    if not p.running:
        took = f"finished in {duration(p.elapsed_seconds)}" if p.elapsed_seconds is not None else "finished"
        return took + later
    if p.stopping or p.eta_seconds is None:
        return "stop requested: no further action starts (in-flight ones finish)" + later
    if p.status == "interrupted":
        return f"interrupted: about {duration(p.eta_seconds)} of work left once resumed" + later
    if p.status == "approved" or (p.status is None and not p.finished and not p.in_progress):
        return f"not started; estimated {duration(p.eta_seconds)}" + later
    return f"ETA {duration(p.eta_seconds)}" + (" for this run" if later else "") + later


def progress_lines(p: Progress) -> tuple[str, ...]:
    """What the plan page and ``plans show`` print, one fact per line."""
    counts = [f"{p.completed}/{p.total} actions done"]
    counts += [f"{n} {what}" for n, what in ((p.failed, "failed"), (p.skipped, "skipped")) if n]
    counts += [f"{n} {what}" for n, what in ((p.in_progress, "in progress"), (p.pending, "pending")) if n]
    lines = [", ".join(counts), moved_line(p)]
    if p.median_seconds:
        lines.append(
            "median time per action: "
            + ", ".join(f"{k} {duration(v)} ({p.measured[k]} measured)" for k, v in p.median_seconds.items())
        )
    elif p.running:
        lines.append(
            "no action finished yet: assuming "
            + ", ".join(f"{k} {duration(v)}" for k, v in DEFAULT_SECONDS.items())
            + " each"
        )
    lines.append(eta_text(p))
    if p.running:
        pc = p.pacing
        lines.append(
            f"pacing: {pc.max_parallel_unloads} unload(s) at a time, at most {pc.max_unloads_per_broker} per broker, "
            f"{duration(pc.unload_pacing_seconds)} pause after each action"
            + (f", at most {pc.max_unloads_per_run} unload(s) per run" if pc.max_unloads_per_run is not None else "")
        )
    return tuple(lines)


def action_line(p: Progress, a: ActionProgress) -> str:
    """The executor's log line after action ``a`` reached a final state: ``unload 3/12 done
    (t/ns/0x...: broker-1 -> broker-4, 1.9 s); moved 4,200 msg/s, 38 MiB/s of 12,600 msg/s, ... planned;
    ETA 2 min 10 s``."""
    outcome = {"completed": "done"}.get(a.state, a.state)
    move = f"{a.source} -> {a.destination}" if a.kind == "unload" else f"on {a.source}"
    took = f", {duration(a.seconds)}" if a.seconds is not None else ""
    return f"{a.kind} {p.finished}/{p.total} {outcome} ({a.bundle}: {move}{took}); {moved_line(p)}; {eta_text(p)}"
