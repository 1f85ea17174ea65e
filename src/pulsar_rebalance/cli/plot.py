"""A plan as a picture: per-broker weighted max usage before, predicted after and measured after."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

from pulsar_rebalance.errors import ConfigError, RebalanceError

CHART_FORMATS = (".png", ".svg", ".pdf")
"""File extensions ``--plot`` accepts (what the chart is written as)."""


def chart_path(target: str | Path, plan_id: str) -> Path:
    """Where ``--plot TARGET`` writes: TARGET itself, or ``TARGET/<plan id>.png`` for a directory.

    A directory is an existing one or a path ending in ``/``. Raises ``ConfigError`` (exit 2) for
    an empty path or an extension other than :data:`CHART_FORMATS`.
    """
    text = os.fspath(target)
    if not text.strip():
        raise ConfigError("--plot needs a file name or a directory", key="plot")
    path = Path(text)
    if text.endswith(("/", os.sep)) or _is_dir(path):
        if not plan_id or plan_id in (".", "..") or "/" in plan_id or os.sep in plan_id:
            raise ConfigError(f"plan id {plan_id!r} cannot name a file in --plot {text!r}", key="plot")
        return path / f"{plan_id}.png"
    if path.suffix.lower() not in CHART_FORMATS:
        raise ConfigError(
            f"--plot {text!r}: unsupported chart format {path.suffix or '(no extension)'!r}; "
            f"use a file ending in {', '.join(CHART_FORMATS)} or a directory",
            key="plot",
        )
    return path


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # e.g. a name too long for the file system: not a directory we can write into
        return False


def plot_plan(plan: Any, path: str | Path) -> Path:
    """Write the chart of ``plan`` (a ``PlanView``) to ``path`` (format from its extension) and return the path."""
    out = Path(path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(plan_chart(plan, (out.suffix.lstrip(".") or "png").lower()))
    except OSError as exc:
        raise RebalanceError(f"cannot write the chart to {out}: {exc.strerror or exc}") from None
    return out


def plan_png(plan: Any) -> bytes:
    """The chart as PNG bytes (the plan page serves it)."""
    return plan_chart(plan, "png")


def plan_chart(plan: Any, fmt: str = "png") -> bytes:
    """The chart in ``fmt`` (png, svg, pdf). Uses matplotlib's object API (no pyplot state), so web threads can call it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    summary = plan.summary or {}
    brokers = summary.get("brokers") or {}
    measured = (plan.result or {}).get("broker_usage_after") or {}
    names = sorted(brokers)
    before = [100 * brokers[b]["before"]["usage"] for b in names]
    predicted = [100 * brokers[b]["after"]["usage"] for b in names]
    after = [100 * measured[b] if b in measured else float("nan") for b in names]
    x = range(len(names))
    width = 0.27
    fig = Figure(figsize=(max(6.0, 1.3 * len(names) + 2), 4.2), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.bar([i - width for i in x], before, width, label="before", color="#9aa5b1")
    ax.bar(list(x), predicted, width, label="predicted after", color="#7fb3e6")
    if measured:
        ax.bar([i + width for i in x], after, width, label="measured after", color="#2f6db3")
    ax.set_xticks(list(x), names, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("weighted max resource usage (%)")
    s = summary
    ax.set_title(
        f"plan {plan.plan_id} ({plan.status}): {s.get('numBundleUnloads', 0)} unload(s), "
        f"{s.get('numBundleSplits', 0)} split(s)",
        fontsize=10,
    )
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt)
    return buf.getvalue()
