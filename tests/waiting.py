"""Waiting for a condition in tests (never a bare sleep in its place)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def wait_for(condition: Callable[[], object], deadline_s: float, what: str, *, every: float = 0.02) -> None:
    """Poll ``condition`` until true; fail naming ``what`` after ``deadline_s`` seconds."""
    end = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline_s}s waiting for {what}")
        threading.Event().wait(every)
