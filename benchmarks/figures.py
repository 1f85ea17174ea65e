"""Figures in the docs: every number is written by the script that measured it.

Each benchmark script measures, then writes a JSON file under ``docs/benchmarks/`` (:func:`write_json`:
the results plus ``meta``: date, machine, load average, the exact command) and renders marked blocks
from that JSON into Markdown files (:func:`update`)::

    <!-- pipeline-summary:start (written by benchmarks/bench_pipeline.py from docs/benchmarks/pipeline.json) -->
    _Measured 2026-11-25 18:02 UTC on ... (2 cores, 7.8 GiB RAM); load average ...; command: `...`._

    | ... the table ... |
    <!-- pipeline-summary:end -->

A script declares its blocks in a module-level ``BLOCKS = {"name": render_function}``; a render function
takes the JSON document (a dict) and returns the block's Markdown body. ``tests/test_docs_figures.py``
renders every marked block of README.md and docs/**/*.md again from the committed JSON (no benchmark is
run) and compares, so a hand-edited block or a JSON newer than its blocks fails the test.

Standard library only: the test imports this module, and each script it names, without running anything.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import importlib.util
import json
import os
import platform
import re
import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
"""The project's front page: the headline blocks a newcomer sees first (worst case first)."""
BENCHMARKS_INDEX = ROOT / "docs" / "benchmarks" / "README.md"
"""Every benchmark's headline block with its prose (the page GitHub shows for ``docs/benchmarks/``)."""

CORE_SOURCES = "pulsar_rebalance/core/"
"""The decision core (the planner, the do-no-harm guard, Pulsar's algorithms): reports whose ``sources`` record the
same digests for it ran the same decision code (the simulated cluster's code may differ)."""


def core_digest(sources: dict[str, str] | None) -> str:
    """One short digest of the decision core's sources (:data:`CORE_SOURCES`) as a report records them
    (``unknown`` for a report that recorded none)."""
    items = "".join(f"{k}={v};" for k, v in sorted((sources or {}).items()) if k.startswith(CORE_SOURCES))
    return hashlib.sha256(items.encode()).hexdigest()[:10] if items else "unknown"


MARKER = re.compile(
    r"<!-- (?P<name>[a-z0-9][a-z0-9-]*):start \(written by (?P<script>\S+) from (?P<json>\S+)\) -->\n"
    r"(?P<body>.*?)"
    r"<!-- (?P=name):end -->",
    re.DOTALL,
)


# ---------------------------------------------------------------- measuring: machine, load, command


def machine() -> dict[str, Any]:
    """CPU model, cores, RAM, Python and OS of this machine (read from /proc where it exists)."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram_gib = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
                break
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": ram_gib,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


class LoadSampler:
    """Samples the 1-minute load average every ``interval`` seconds while the benchmark runs.

    ``with LoadSampler() as load: ...`` then ``load.summary()``: the 1/5/15-minute load averages at the
    start and at the end, and the lowest and highest 1-minute value seen in between.
    """

    def __init__(self, interval: float = 5.0) -> None:
        self.interval = interval
        self.samples: list[float] = []
        self.start: tuple[float, ...] = ()
        self.end: tuple[float, ...] = ()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadSampler:
        self.start = os.getloadavg()
        self.samples.append(self.start[0])
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.end = os.getloadavg()
        self.samples.append(self.end[0])

    def summary(self) -> dict[str, Any]:
        return {
            "start": [round(v, 2) for v in self.start],
            "end": [round(v, 2) for v in self.end],
            "min_1m": round(min(self.samples), 2),
            "max_1m": round(max(self.samples), 2),
        }


class Progress:
    """Progress of a benchmark's runs on stderr: a line every ``every`` runs and at the last one, ``k/N runs, S s,
    about R s left`` (R at the pace so far: long runs first, as the benchmarks order them, overstate it early)."""

    def __init__(self, total: int, every: int = 20, out: Any = None) -> None:
        self.total = total
        self.every = max(1, every)
        self.done = 0
        self.out = out
        self.started = time.perf_counter()

    def tick(self) -> str | None:
        """One more run done: the line printed (None: none this time)."""
        self.done += 1
        if self.done % self.every and self.done != self.total:
            return None
        elapsed = time.perf_counter() - self.started
        left = elapsed / self.done * max(0, self.total - self.done)
        line = f"{self.done}/{self.total} runs, {elapsed:.0f} s, about {left:.0f} s left"
        print(line, file=self.out or sys.stderr, flush=True)
        return line


def command(argv: list[str] | None = None) -> str:
    """The exact command that ran this script, from the repository root (with PYTHONPATH if set)."""
    argv = sys.argv if argv is None else argv
    script = Path(argv[0]).resolve()
    with contextlib.suppress(ValueError):
        script = script.relative_to(ROOT)
    env = [f"PYTHONPATH={os.environ['PYTHONPATH']}"] if os.environ.get("PYTHONPATH") else []
    return " ".join([*env, shlex.join([sys.executable, str(script), *argv[1:]])])


def meta(load: LoadSampler, *, cmd: str | None = None, **extra: Any) -> dict[str, Any]:
    """What every JSON carries: date (UTC), machine, load average during the run, the command."""
    return {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "load_average": load.summary(),
        "command": cmd or command(),
        **extra,
    }


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Write the benchmark's JSON (sorted keys, one line per value: diffs stay readable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")


# ---------------------------------------------------------------- rendering and replacing blocks


def provenance(meta_doc: dict[str, Any]) -> str:
    """One line: when, where, under what load, by which command."""
    m = meta_doc["machine"]
    load = meta_doc["load_average"]
    cpu = m.get("cpu") or "a machine whose CPU model was not recorded"
    ram = f"{m['ram_gib']} GiB RAM" if m.get("ram_gib") else "RAM not recorded"
    if "min_1m" in load:
        load_text = (
            f"1-minute load average {load['min_1m']}–{load['max_1m']} during the run "
            f"({'/'.join(str(v) for v in load['start'])} over 1/5/15 minutes at the start)"
        )
    else:  # a run that recorded its load only as text (before this module)
        load_text = f"load average {load['text']}"
    software = "".join(f"; {v}" for v in (m.get("python") and f"Python {m['python']}", m.get("platform")) if v)
    text = (
        f"_Measured {meta_doc['date']} on {cpu} ({m['cores']} cores, {ram}{software}; a shared machine), "
        f"{load_text}; command: `{meta_doc['command']}`._"
    )
    if meta_doc.get("note"):
        text += f" _({meta_doc['note']}.)_"
    return text


def render(name: str, script: str, json_rel: str, doc: dict[str, Any] | None = None) -> str:
    """The whole marked block ``name`` (markers included), rendered from the JSON by the script's ``BLOCKS``."""
    if doc is None:
        doc = json.loads((ROOT / json_rel).read_text(encoding="utf-8"))
    body = load_script(script).BLOCKS[name](doc).rstrip("\n")
    return (
        f"<!-- {name}:start (written by {script} from {json_rel}) -->\n"
        f"{provenance(doc['meta'])}\n\n{body}\n"
        f"<!-- {name}:end -->"
    )


def replace_block(md_path: Path, name: str, block: str) -> None:
    """Replace the marked block ``name`` in ``md_path`` by ``block``; the block must already be there."""
    text = md_path.read_text(encoding="utf-8")
    found = [b for b in find_blocks(text) if b.name == name]
    if len(found) != 1:
        raise ValueError(f"{md_path}: expected one block {name!r}, found {len(found)}")
    b = found[0]
    md_path.write_text(text[: b.start] + block + text[b.end :], encoding="utf-8")


def update(script: str, json_rel: str, doc: dict[str, Any], targets: dict[str, list[Path]]) -> None:
    """Render each block from ``doc`` and replace it in every file named for it."""
    for name, paths in targets.items():
        block = render(name, script, json_rel, doc)
        for path in paths:
            replace_block(path, name, block)
            print(f"wrote block {name} in {path}", file=sys.stderr)


@dataclass(frozen=True)
class Block:
    name: str
    script: str
    json: str
    text: str
    start: int
    end: int


def find_blocks(text: str) -> Iterator[Block]:
    for m in MARKER.finditer(text):
        yield Block(m["name"], m["script"], m["json"], m[0], m.start(), m.end())


_SCRIPTS: dict[str, ModuleType] = {}


def load_script(script: str) -> ModuleType:
    """Import a benchmark script by its repository path (its ``main`` is not run)."""
    if script not in _SCRIPTS:
        if str(ROOT / "benchmarks") not in sys.path:  # the scripts import this module as ``figures``
            sys.path.insert(0, str(ROOT / "benchmarks"))
        path = ROOT / script
        spec = importlib.util.spec_from_file_location(f"_bench_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {script}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
        spec.loader.exec_module(module)
        _SCRIPTS[script] = module
    return _SCRIPTS[script]


Renderer = Callable[[dict[str, Any]], str]


def table(header: list[str], rows: list[list[Any]], align: str = "") -> str:
    """A Markdown table; ``align`` has one letter per column, ``r`` right-aligns it."""
    align = align.ljust(len(header), "l")
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)
