"""Imbalance-triggered runs: when one load sample should start a rebalance run (pure; no I/O).

The watch takes one sample at a time (the worst broker's max resource usage, a fraction) and keeps two
numbers per cluster: how many consecutive samples were at or over the threshold, and whether it is
*armed*. A run is triggered when, in one sample, all of these hold:

* the worst broker has been at or over ``threshold`` for ``samples`` consecutive samples;
* the watch is armed: at most one run per *episode* — triggering disarms it, and only a sample with the
  worst broker back below the threshold re-arms it;
* the cluster is inside a maintenance window (or has none);
* no other run of the cluster is planning or executing, and no plan awaits a decision or execution.

A sample that meets the count but not the last two leaves the watch armed: the next sample tries again.
"""

from __future__ import annotations

from dataclasses import dataclass

from pulsar_rebalance.errors import ConfigError


@dataclass(frozen=True)
class WatchRule:
    threshold: float  # the worst broker's max resource usage (fraction, 0.85 = 85 %)
    samples: int  # consecutive samples at or over it

    def __post_init__(self) -> None:
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)):
            raise ConfigError(f"threshold must be a number, got {self.threshold!r}", key="threshold")
        if not 0 < self.threshold <= 2:
            raise ConfigError(f"threshold must be a fraction in (0, 2], got {self.threshold!r}", key="threshold")
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or not 1 <= self.samples <= 1000:
            raise ConfigError(f"samples must be an integer from 1 to 1000, got {self.samples!r}", key="samples")


@dataclass(frozen=True)
class WatchStep:
    over_count: int
    armed: bool
    trigger: bool
    reason: str


def watch_step(
    rule: WatchRule, *, over_count: int, armed: bool, worst: float, window_open: bool, busy: str | None
) -> WatchStep:
    """The watch after one sample. ``busy``: why another run of the cluster blocks a new one (None: free)."""
    if worst < rule.threshold:
        note = " (re-armed)" if not armed else ""
        return WatchStep(0, True, False, f"worst broker {worst:.1%} below {rule.threshold:.0%}{note}")
    count = over_count + 1
    head = f"worst broker {worst:.1%} >= {rule.threshold:.0%} for {count} of {rule.samples} sample(s)"
    if not armed:
        return WatchStep(count, False, False, f"{head}; this episode already triggered a run")
    if count < rule.samples:
        return WatchStep(count, True, False, head)
    if not window_open:
        return WatchStep(count, True, False, f"{head}; outside the maintenance window")
    if busy:
        return WatchStep(count, True, False, f"{head}; {busy}")
    return WatchStep(count, False, True, f"{head}: triggering a rebalance run")


__all__ = ["WatchRule", "WatchStep", "watch_step"]
