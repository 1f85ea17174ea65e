"""A plan as a picture: per-broker weighted max usage before, predicted after and measured after."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any


def plot_plan(plan: Any, path: str | Path) -> Path:
    """Write a PNG bar chart of ``plan`` (a ``PlanView``) to ``path`` and return the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(plan_png(plan))
    return out


def plan_png(plan: Any) -> bytes:
    """The chart as PNG bytes. Uses matplotlib's object API (no pyplot state), so web threads can call it."""
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
        f"{s.get('numBundleSplits', 0)} split(s)", fontsize=10,
    )
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
