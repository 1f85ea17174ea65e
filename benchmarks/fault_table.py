"""The fault-injection figure table (docs/fault-injection.md), rendered from docs/benchmarks/faults.json.

Not run by hand: ``bash scripts/fault-report.sh`` runs ``tests/faults`` with ``PULSAR_REBALANCE_FAULT_REPORT``
set, and the suite's harness (``tests/faults/conftest.py``) writes the JSON (one row per case: faults
injected, survived, duplicate actions, lost records, what happened) and this block through ``figures``.
"""

from __future__ import annotations

from typing import Any

import figures

SCRIPT = "benchmarks/fault_table.py"
JSON = "docs/benchmarks/faults.json"


def render(doc: dict[str, Any]) -> str:
    rows = sorted(doc["rows"], key=lambda r: r["case"])
    keys = ("faults", "survived", "duplicates", "lost")
    total = {k: sum(r[k] for r in rows) for k in keys}
    table = [[f"`{r['case']}`", *(r[k] for k in keys), r["note"]] for r in rows]
    table.append(["**total**", *(total[k] for k in keys), ""])
    return "\n".join(
        [
            figures.table(
                ["case", "faults injected", "survived", "duplicate actions", "lost records", "what happened"],
                table,
                "lrrrrl",
            ),
            "",
            f"pytest exit status {doc['exit_status']}; {doc['wall_s']:.0f} s wall time.",
        ]
    )


# blocks written by the fault suite's harness (figures.update); tests/test_docs_figures.py re-renders them
BLOCKS = {"fault-table": render}
