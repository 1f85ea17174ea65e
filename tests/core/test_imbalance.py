"""The imbalance watch: N consecutive samples over the threshold trigger one run per episode."""

from __future__ import annotations

import pytest

from pulsar_rebalance.core.imbalance import WatchRule, watch_step
from pulsar_rebalance.errors import ConfigError

RULE = WatchRule(threshold=0.85, samples=3)


def run(worsts, *, window_open=True, busy=None):
    over, armed, fired = 0, True, []
    for w in worsts:
        step = watch_step(RULE, over_count=over, armed=armed, worst=w, window_open=window_open, busy=busy)
        over, armed = step.over_count, step.armed
        fired.append(step.trigger)
    return fired, step


def test_three_samples_over_trigger_once_per_episode():
    fired, last = run([0.9, 0.9, 0.9, 0.95, 0.9, 0.9])
    assert fired == [False, False, True, False, False, False]
    assert "already triggered" in last.reason


def test_a_sample_below_resets_the_count_and_re_arms():
    fired, _ = run([0.9, 0.9, 0.8, 0.9, 0.9, 0.9, 0.7, 0.9, 0.9, 0.9])
    assert fired == [False, False, False, False, False, True, False, False, False, True]
    step = watch_step(RULE, over_count=5, armed=False, worst=0.5, window_open=True, busy=None)
    assert step.armed and step.over_count == 0 and "re-armed" in step.reason


def test_outside_the_window_or_while_busy_it_waits_armed():
    fired, last = run([0.9] * 5, window_open=False)
    assert not any(fired) and last.armed and "outside the maintenance window" in last.reason
    fired, last = run([0.9] * 4, busy="run manual__1 of this cluster is planning")
    assert not any(fired) and last.armed and last.reason.endswith("run manual__1 of this cluster is planning")
    # once free, the next sample over the threshold triggers
    step = watch_step(RULE, over_count=4, armed=True, worst=0.9, window_open=True, busy=None)
    assert step.trigger and not step.armed


def test_exactly_at_the_threshold_counts_as_over():
    assert watch_step(WatchRule(0.85, 1), over_count=0, armed=True, worst=0.85, window_open=True, busy=None).trigger


@pytest.mark.parametrize(
    ("threshold", "samples", "message"),
    [(0, 3, "threshold must be a fraction"), (85, 3, "threshold must be a fraction"), ("x", 3, "must be a number"),
     (0.8, 0, "samples must be an integer"), (0.8, 2.5, "samples must be an integer")],
)  # fmt: skip
def test_bad_rules_are_refused(threshold, samples, message):
    with pytest.raises(ConfigError, match=message):
        WatchRule(threshold, samples)
