"""Fixtures shared by the decision core's tests."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from pulsar_rebalance.core.pulsar.shedders import get_shedder


@pytest.fixture
def narrow_band(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The GlobalPlanner with the band it had before it took ThresholdShedder's (act 5 points above the
    ideal, plan down to 1.5 points): noise and swings reach that band, so a test of what guards against
    them (smoothing, hit counts, clipping) fails without that guard, as it did when it was written."""
    planner = get_shedder("GlobalPlanner")
    narrow = dataclasses.replace(
        planner.settings, target_abs=0.015, target_rel=0.03, trigger_abs=0.05, trigger_rel=0.10
    )
    monkeypatch.setattr(planner, "settings", narrow)
    yield
