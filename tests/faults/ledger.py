"""The fault-injection suite's figure table: each case's row (faults injected, survived, duplicates, lost),
the table the terminal summary prints, and the report ``scripts/fault-report.sh`` writes.

A plain module, not a conftest, so that the root ``tests/conftest.py`` can print the table on the process
that writes the terminal summary: on two pytest-xdist workers (``scripts/test.sh``) that is the controller,
which loads ``tests/faults/conftest.py`` only when ``tests/faults`` is named on the command line; the
workers hand their rows over in ``workeroutput`` (``WORKER_OUTPUT_KEY``). With ``PULSAR_REBALANCE_FAULT_REPORT=PATH``
set, the summary also writes ``docs/benchmarks/faults.json`` and renders the marked table block in PATH from it
(``benchmarks/figures.py``).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[2]
REPORT_ENV = "PULSAR_REBALANCE_FAULT_REPORT"
WORKER_OUTPUT_KEY = "fault_ledger"


class _Checked(Protocol):
    duplicates: int
    lost: int

    @property
    def ok(self) -> bool: ...


@dataclass
class Figures:
    case: str
    faults: int = 0
    survived: int = 0
    duplicates: int = 0
    lost: int = 0
    note: str = ""

    def record(self, faults: int, inv: _Checked, *, ok: bool = True, note: str = "") -> None:
        """One case's figures from its final check: all ``faults`` survived iff ``ok`` and the invariants hold."""
        self.faults, self.duplicates, self.lost, self.note = faults, inv.duplicates, inv.lost, note
        self.survived = faults if ok and inv.ok else 0


LEDGER: dict[str, Figures] = {}
_STARTED = time.monotonic()  # imported by tests/conftest.py, so when the session starts
_LOAD_START = os.getloadavg()


def to_rows() -> list[dict[str, Any]]:
    """This process's rows, as a worker hands them to the controller."""
    return [asdict(r) for r in LEDGER.values()]


def merge(rows: Iterable[dict[str, Any]]) -> None:
    """A finished worker's rows, on the controller."""
    for row in rows:
        LEDGER[row["case"]] = Figures(**row)


def table() -> list[str]:
    rows = sorted(LEDGER.values(), key=lambda r: r.case)
    total = Figures("total", *(sum(getattr(r, k) for r in rows) for k in ("faults", "survived", "duplicates", "lost")))
    lines = [
        "| case | faults injected | survived | duplicate actions | lost records | what happened |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in [*rows, total]:
        name = f"**{r.case}**" if r is total else f"`{r.case}`"
        lines.append(f"| {name} | {r.faults} | {r.survived} | {r.duplicates} | {r.lost} | {r.note} |")
    return lines


def terminal_summary(terminalreporter: Any, exitstatus: int) -> None:
    """Print the table (when any case ran) and, with ``REPORT_ENV`` set, write the report."""
    if not LEDGER:
        return
    terminalreporter.section("fault injection: figures")
    for line in table():
        terminalreporter.write_line(line)
    target = os.environ.get(REPORT_ENV)
    if not target:
        return
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import fault_table
    import figures as doc_figures

    load = doc_figures.LoadSampler()
    load.start, load.end, load.samples = _LOAD_START, os.getloadavg(), [_LOAD_START[0], os.getloadavg()[0]]
    doc = {
        "meta": doc_figures.meta(load, cmd="bash scripts/fault-report.sh"),
        "exit_status": int(exitstatus),
        "wall_s": time.monotonic() - _STARTED,
        "rows": [asdict(r) for r in sorted(LEDGER.values(), key=lambda r: r.case)],
    }
    doc_figures.write_json(ROOT / fault_table.JSON, doc)
    doc_figures.update(fault_table.SCRIPT, fault_table.JSON, doc, {"fault-table": [Path(target)]})
    terminalreporter.write_line(f"fault figures written to {fault_table.JSON} and {target}")
