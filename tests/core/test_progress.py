"""core.progress: counts, traffic moved, median durations and the ETA, computed by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pulsar_rebalance.core.progress import (
    ActionProgress,
    Pacing,
    action_line,
    cap_reached,
    duration,
    eta_text,
    plan_progress,
    progress_lines,
)

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
MiB = 2**20


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def unload(seq, state="pending", *, src="b1", dst=None, start=None, end=None, rate=1000.0, mib=10.0, **kw):
    return ActionProgress(
        seq=seq,
        kind="unload",
        state=state,
        bundle=f"t/ns/0x{seq:08x}_0x{seq + 1:08x}",
        source=src,
        destination=dst or f"b{seq + 10}",
        started_at=None if start is None else t(start),
        finished_at=None if end is None else t(end),
        msg_rate=rate,
        msg_throughput=mib * MiB,
        **kw,
    )


def test_nothing_started_uses_the_default_durations():
    # 8 unloads from 8 different sources to 8 different destinations; 4 at a time, 1 s pause:
    # waves = ceil(8/4) = 2; each wave costs default 5 s + 1 s pause -> ETA 12 s. Plus one split: 2 s + 1 s.
    acts = [unload(i, src=f"s{i}") for i in range(1, 9)]
    acts.append(ActionProgress(seq=0, kind="split", state="pending", bundle="t/ns/0x0_0x1", source="s1"))
    p = plan_progress(acts, Pacing(max_parallel_unloads=4, unload_pacing_seconds=1.0), T0, status="approved")
    assert (p.total, p.completed, p.pending, p.failed, p.skipped, p.deferred) == (9, 0, 9, 0, 0, 0)
    assert p.eta_seconds == 3.0 + 12.0
    assert p.elapsed_seconds is None and p.median_seconds == {}
    assert p.moved_msg_rate == 0 and p.planned_msg_rate == 8000.0 and p.planned_throughput == 80 * MiB
    lines = progress_lines(p)
    assert lines[0] == "0/9 actions done, 9 pending"
    assert lines[1] == "moved 0 msg/s, 0 B/s of 8,000 msg/s, 80 MiB/s planned"
    assert lines[2] == "no action finished yet: assuming split 2.0 s, unload 5.0 s each"
    assert lines[3] == "not started; estimated 15 s"


def test_half_done_uses_the_median_measured_duration_and_the_in_flight_unload():
    # 12 unloads, each from its own source; 2 at a time, no pause. Done: 6 with durations 1, 2, 2, 3, 4, 10 s
    # (median (2+3)/2 = 2.5 s). In flight: one started 1 s ago (2.5 - 1 = 1.5 s left). Pending: 5 ->
    # ceil(5/2) = 3 waves * 2.5 s = 7.5 s. ETA = 1.5 + 7.5 = 9 s.
    took = [1, 2, 2, 3, 4, 10]
    acts = [unload(i + 1, "completed", src=f"s{i}", start=10 * i, end=10 * i + d) for i, d in enumerate(took)]
    acts.append(unload(7, "in_progress", src="s7", start=99))
    acts += [unload(i, src=f"s{i}") for i in range(8, 13)]
    p = plan_progress(acts, Pacing(max_parallel_unloads=2), t(100), status="executing")
    assert p.median_seconds == {"unload": 2.5} and p.measured == {"unload": 6}
    assert p.eta_seconds == 9.0
    assert (p.completed, p.in_progress, p.pending, p.finished) == (6, 1, 5, 6)
    assert p.moved_msg_rate == 6000.0 and p.moved_throughput == 60 * MiB
    assert p.elapsed_seconds == 100.0
    assert progress_lines(p)[:4] == (
        "6/12 actions done, 1 in progress, 5 pending",
        "moved 6,000 msg/s, 60 MiB/s of 12,000 msg/s, 120 MiB/s planned",
        "median time per action: unload 2.5 s (6 measured)",
        "ETA 9.0 s",
    )


def test_the_per_broker_limit_makes_more_waves_than_parallelism():
    # 6 pending unloads all from b1; 4 in parallel but at most 2 per broker: max(ceil(6/4), ceil(6/2)) = 3 waves
    acts = [unload(i, src="b1") for i in range(1, 7)]
    p = plan_progress(acts, Pacing(max_parallel_unloads=4, max_unloads_per_broker=2), T0)
    assert p.eta_seconds == 3 * 5.0


def test_a_failed_action_counts_as_finished_moves_nothing_and_gives_no_duration():
    # done: 2 s and 4 s (median 3 s); failed after 30 s (a timeout: not a measured duration); 2 pending,
    # 4 at a time with a 2 s pause: 1 wave of 3 + 2 = 5 s.
    acts = [
        unload(1, "completed", start=0, end=2, rate=100.0, mib=1.0),
        unload(2, "completed", start=0, end=4, rate=200.0, mib=2.0),
        unload(3, "failed", start=0, end=30, rate=400.0, mib=4.0),
        unload(4),
        unload(5, rate=None),
    ]
    p = plan_progress(acts, Pacing(unload_pacing_seconds=2.0), t(30), status="executing")
    assert (p.completed, p.failed, p.finished, p.pending) == (2, 1, 3, 2)
    assert p.median_seconds == {"unload": 3.0}
    assert p.eta_seconds == 5.0
    assert p.moved_msg_rate == 300.0 and p.planned_msg_rate == 1700.0 and p.traffic_unknown
    lines = progress_lines(p)
    assert lines[0] == "2/5 actions done, 1 failed, 2 pending"
    assert lines[1].endswith("planned (at least: some unload recorded no load)")
    assert action_line(p, acts[2]) == (
        "unload 3/5 failed (t/ns/0x00000003_0x00000004: b1 -> b13); moved 300 msg/s, 3.0 MiB/s of "
        "1,700 msg/s, 27 MiB/s planned (at least: some unload recorded no load); ETA 5.0 s"
    )


def test_a_capped_run_says_the_rest_waits_for_the_next_run():
    # max_unloads_per_run=4: 3 done (1 s each), so 1 more starts in this run (1 wave of 1 s) and 6 wait.
    acts = [unload(i, "completed", src=f"s{i}", start=i, end=i + 1) for i in range(1, 4)]
    acts += [unload(i, src=f"s{i}") for i in range(4, 11)]
    p = plan_progress(acts, Pacing(max_unloads_per_run=4), t(5), status="executing")
    assert p.deferred == 6 and p.eta_seconds == 1.0
    assert eta_text(p) == "ETA 1.0 s for this run; 6 unloads wait for the next run (max_unloads_per_run=4)"
    # the executor then skips them with the cap's reason: finished, and they still wait for the next run
    done = [*acts[:4], *(unload(i, "skipped", end=6, capped=True) for i in range(5, 11))]
    done[3] = unload(4, "completed", src="s4", start=5, end=6)
    p = plan_progress(done, Pacing(max_unloads_per_run=4), t(7), status="partially_executed")
    assert (p.completed, p.skipped, p.deferred, p.running) == (4, 6, 6, False)
    assert eta_text(p) == "finished in 5.0 s; 6 unloads wait for the next run (max_unloads_per_run=4)"


def test_a_capped_skip_is_recognised_from_the_stored_row():
    row = {"seq": 3, "kind": "unload", "state": "skipped", "error": cap_reached(4), "predicted": None}
    assert ActionProgress.of(row).capped
    assert not ActionProgress.of({**row, "error": "load drift: ..."}).capped


def test_a_finished_plan_says_how_long_it_took_and_a_reconciled_action_is_not_measured():
    acts = [
        ActionProgress(seq=0, kind="split", state="completed", started_at=t(0), finished_at=t(1.5)),
        unload(1, "completed", start=2, end=4),
        unload(2, "completed", start=2, end=125, reconciled=True),  # started by an earlier attempt
    ]
    p = plan_progress(acts, Pacing(), t(500), status="executed")
    assert p.median_seconds == {"split": 1.5, "unload": 2.0}
    assert p.eta_seconds == 0.0 and p.elapsed_seconds == 125.0
    assert eta_text(p) == "finished in 2 min 5 s"
    assert not any(line.startswith("pacing:") for line in progress_lines(p))


def test_a_stop_request_has_no_eta_and_an_interrupted_plan_says_it_waits_for_resume():
    acts = [unload(1, "completed", start=0, end=3), unload(2)]
    assert plan_progress(acts, Pacing(), t(4), stopping=True).eta_seconds is None
    assert eta_text(plan_progress(acts, Pacing(), t(4), stopping=True)).startswith("stop requested")
    assert eta_text(plan_progress(acts, Pacing(), t(4), status="interrupted")) == (
        "interrupted: about 3.0 s of work left once resumed"
    )


def test_pacing_from_run_params_and_durations_in_words():
    assert Pacing.of(
        {"max_parallel_unloads": 8, "max_unloads_per_run": 5, "unload_pacing_seconds": 2, "other": 1}
    ) == Pacing(max_parallel_unloads=8, max_unloads_per_broker=2, max_unloads_per_run=5, unload_pacing_seconds=2.0)
    assert Pacing.of(None) == Pacing() == Pacing.of({"max_parallel_unloads": True, "unload_pacing_seconds": "x"})
    assert [duration(s) for s in (1.94, 42.4, 130, 120, 3900, 7200)] == [
        "1.9 s",
        "42 s",
        "2 min 10 s",
        "2 min",
        "1 h 5 min",
        "2 h",
    ]
