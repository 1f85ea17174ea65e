"""Benchmark of the ``decide`` contract at fleet scale: 1,000 brokers, 100,000 bundles, one cycle.

Usage::

    .venv/bin/python benchmarks/bench_decide.py                 # defaults below, writes docs/benchmarks/decide.json + its block in decide.md
    .venv/bin/python benchmarks/bench_decide.py --brokers 200 --bundles 20000 --no-write
    .venv/bin/python benchmarks/bench_decide.py --shedding GlobalPlanner   # decide-GlobalPlanner.json + .md

What is measured:

1. In process: ``json.loads`` of the scenario, ``parse_scenario`` (full validation), ``run_scenario``
   (ThresholdShedder + split trigger + LeastLongTermMessageRate destinations for every unload) and
   ``json.dumps`` of the result.
2. The real command, ``pulsar-rebalance decide FILE --compact`` as a subprocess: wall time of the
   whole process (interpreter start, imports, reading the file, deciding, printing).

The scenario is generated deterministically (``--seed``): 100 namespaces of equal-width bundles, each
broker reporting its bundles in ``lastStats`` (rates derived by Pulsar's rule), one BundleData per
bundle, CPU usage spread so that roughly one broker in ten is above average + 10%.
Target (issue): the whole CLI process under 10 s on this 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import figures  # benchmarks/figures.py: JSON + marked blocks in the docs

ROOT = Path(__file__).resolve().parents[1]
MB = 1024 * 1024
NOW = 1_700_000_000_000


def generate(*, brokers: int, bundles: int, seed: int, shedding: str = "ThresholdShedder") -> dict[str, Any]:
    """A scenario of ``brokers`` load reports owning ``bundles`` bundles in total.

    For ThresholdShedder (the committed decide.md) the usages are random, as before. For GlobalPlanner
    the usages follow the bundles' traffic (CPU from msg/s and bytes/s, NIC = bytes/s, 10 Gbit/s NICs)
    and one broker in ten carries twice the traffic: the planner only moves load it can attribute.
    """
    traffic_driven = shedding == "GlobalPlanner"
    rng = random.Random(seed)
    namespaces = 100
    per_ns = max(1, bundles // namespaces)
    step = (1 << 32) // per_ns
    names = []
    for ns in range(namespaces):
        for i in range(per_ns):
            upper = 0xFFFFFFFF if i == per_ns - 1 else (i + 1) * step
            names.append(f"tenant-{ns % 10}/ns-{ns}/0x{i * step:08x}_0x{upper:08x}")
    names = names[:bundles]
    rng.shuffle(names)
    reports: dict[str, Any] = {}
    bundle_data: dict[str, Any] = {}
    per_broker = len(names) // brokers
    for b in range(brokers):
        mine = names[b * per_broker : (b + 1) * per_broker] if b < brokers - 1 else names[b * per_broker :]
        last_stats = {}
        for name in mine:
            thr = rng.uniform(0.05, 2.0) * MB
            rate = thr / 1000.0
            last_stats[name] = {
                "msgRateIn": rate,
                "msgThroughputIn": thr,
                "msgRateOut": rate * 2,
                "msgThroughputOut": thr * 2,
                "consumerCount": rng.randint(0, 20),
                "producerCount": rng.randint(1, 10),
                "topics": rng.randint(1, 40),
                "cacheSize": 0,
            }
            short = {
                "maxSamples": 10,
                "numSamples": 10,
                "msgThroughputIn": thr,
                "msgThroughputOut": thr * 2,
                "msgRateIn": rate,
                "msgRateOut": rate * 2,
            }
            bundle_data[name] = {
                "shortTermData": short,
                "longTermData": {**short, "maxSamples": 1000, "numSamples": 1000},
                "topics": last_stats[name]["topics"],
            }
        cpu = rng.uniform(20, 60) if rng.random() > 0.1 else rng.uniform(75, 99)
        # same draw order as before (memory, directMemory, bandwidthIn, bandwidthOut): same scenario
        mem, direct = rng.uniform(2000, 7000), rng.uniform(100, 3000)
        bw_in, bw_out = rng.uniform(1e5, 5e5), rng.uniform(1e5, 8e5)
        if traffic_driven:
            # usage follows the bundles' traffic (the simulator's model); one broker in ten is 2x hot
            hot = rng.random() < 0.1
            if hot:
                for name in mine:
                    for key in ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut"):
                        last_stats[name][key] *= 2
                        bundle_data[name]["shortTermData"][key] *= 2
                        bundle_data[name]["longTermData"][key] *= 2
            rate = sum(s["msgRateIn"] + s["msgRateOut"] for s in last_stats.values())
            t_in = sum(s["msgThroughputIn"] for s in last_stats.values())
            t_out = sum(s["msgThroughputOut"] for s in last_stats.values())
            cpu = (10 + 100 * rate / 40000 + 100 * (t_in + t_out) / (200 * MB)) / 16 * rng.uniform(0.97, 1.03)
            bw_in, bw_out = t_in * 8 / 1024, t_out * 8 / 1024
        reports[f"broker-{b:04d}.example.com:8080"] = {
            "webServiceUrl": f"http://broker-{b:04d}.example.com:8080",
            "pulsarServiceUrl": f"pulsar://broker-{b:04d}.example.com:6650",
            "cpu": {"usage": cpu * 16, "limit": 1600.0},
            "memory": {"usage": mem, "limit": 8192.0},
            "directMemory": {"usage": direct, "limit": 4096.0},
            "bandwidthIn": {"usage": bw_in, "limit": 1.25e6 if not traffic_driven else 10 * 1024 * 1024},
            "bandwidthOut": {"usage": bw_out, "limit": 1.25e6 if not traffic_driven else 10 * 1024 * 1024},
            "lastUpdate": NOW,
            "lastStats": last_stats,
            "loadReportType": "LocalBrokerData",
        }
    return {
        "shedding": shedding,
        "seed": seed,
        "assignDestinations": True,
        "cycles": [{"brokers": reports, "bundleData": bundle_data, "nowMs": NOW}],
    }


_CPU: dict[str, float] = {}


def _timed(fn, *args):  # type: ignore[no-untyped-def]
    start, cpu = time.perf_counter(), time.process_time()
    result = fn(*args)
    _CPU[getattr(fn, "__name__", "?")] = time.process_time() - cpu
    return result, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--bundles", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--shedding", default="ThresholdShedder", help="strategy to run (GlobalPlanner writes decide-GlobalPlanner.md)"
    )
    parser.add_argument("--no-write", action="store_true", help="do not write docs/benchmarks/decide.md")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT / "src"))
    from pulsar_rebalance.core.contract.decide import parse_scenario, run_scenario

    load = figures.LoadSampler(interval=1.0)
    load.__enter__()
    doc, t_gen = _timed(
        lambda: generate(brokers=args.brokers, bundles=args.bundles, seed=args.seed, shedding=args.shedding)
    )
    text = json.dumps(doc)
    del doc
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        fh.write(text)
        path = fh.name
    try:
        loaded, t_load = _timed(json.loads, text)
        scenario, t_parse = _timed(parse_scenario, loaded)
        result, t_run = _timed(run_scenario, scenario)
        out_text, t_dump = _timed(json.dumps, result)
        cycle = result["cycles"][0]

        # the console script's code, from this checkout (the installed entry point may be another one)
        cmd = [
            sys.executable,
            "-c",
            "import sys; from pulsar_rebalance.cli import main; sys.exit(main())",
            "decide",
            path,
            "--compact",
        ]
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False, env=env)
        t_cli = time.perf_counter() - start
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return 1
        same = json.loads(proc.stdout) == json.loads(out_text)
    finally:
        os.unlink(path)

    load.__exit__(None, None, None)
    doc = {
        "meta": figures.meta(load),
        "args": {"brokers": args.brokers, "bundles": args.bundles, "seed": args.seed, "shedding": args.shedding},
        "scenario_mib": len(text) / MB,
        "seconds": {
            "json_loads": t_load,
            "parse_scenario": t_parse,
            "run_scenario": t_run,
            "json_dumps": t_dump,
            "run_scenario_cpu": _CPU.get("run_scenario"),
            "cli": t_cli,
            "generate": t_gen,
        },
        "decision": {
            "label": cycle["label"],
            "reason": cycle["reason"],
            "unloads": len(cycle["unloads"]),
            "splits": len(cycle["splits"]),
        },
        "cli_equals_in_process": same,
    }
    print(render_table(doc))
    if not args.no_write:
        suffix = "" if args.shedding == "ThresholdShedder" else f"-{args.shedding}"
        json_path = ROOT / "docs" / "benchmarks" / f"decide{suffix}.json"
        figures.write_json(json_path, doc)
        name = "decide-threshold" if args.shedding == "ThresholdShedder" else f"decide-{args.shedding.lower()}"
        if name not in BLOCKS:
            print(f"wrote {json_path.relative_to(ROOT)} (no docs block for {args.shedding})")
        else:
            md = ROOT / "docs" / "benchmarks" / f"decide{suffix}.md"
            figures.update(SCRIPT, str(json_path.relative_to(ROOT)), doc, {name: [md]})
    return 0 if same else 1


def render_table(doc: dict[str, Any]) -> str:
    """The report's body, from the JSON the run wrote."""
    a, t, d = doc["args"], doc["seconds"], doc["decision"]
    planner = a["shedding"] == "GlobalPlanner"
    in_process = t["json_loads"] + t["parse_scenario"] + t["run_scenario"] + t["json_dumps"]
    cpu = t["run_scenario_cpu"]
    rows = [
        ("scenario size", f"{doc['scenario_mib']:.1f} MiB JSON ({a['brokers']} brokers, {a['bundles']} bundles)"),
        ("json.loads", f"{t['json_loads']:.2f} s"),
        ("parse_scenario (validation)", f"{t['parse_scenario']:.2f} s"),
        (
            "run_scenario (whole-cluster plan)" if planner else "run_scenario (shed + split + place)",
            f"{t['run_scenario']:.2f} s",
        ),
        ("json.dumps (result)", f"{t['json_dumps']:.2f} s"),
        ("run_scenario CPU time (this process only)", "n/a" if cpu is None else f"{cpu:.2f} s"),
        ("in-process total", f"{in_process:.2f} s"),
        ("CLI `pulsar-rebalance decide FILE` (whole process)", f"{t['cli']:.2f} s"),
        ("decision", f"{d['label']}/{d['reason']}: {d['unloads']} unloads, {d['splits']} splits"),
        ("CLI output == in-process output", str(doc["cli_equals_in_process"])),
    ]
    if planner:
        scenario = (
            f"Scenario: one cycle, {a['shedding']} on the generated cluster ({a['brokers']} brokers, "
            f"{a['bundles']} bundles in 100 namespaces, seed {a['seed']}), its usage driven by the bundles' traffic "
            "and one broker in ten carrying twice the traffic: the whole-cluster plan with a destination and "
            "predicted before/after for every move (the plan stops at its 1,000-action cap; the rest would come "
            "in the next run)."
        )
    else:
        scenario = (
            f"Scenario: one cycle, {a['shedding']} with Pulsar's defaults, `assignDestinations: true` "
            "(LeastLongTermMessageRate placement for every unload), split trigger on; generated "
            f"deterministically by the script ({a['brokers']} brokers, {a['bundles']} bundles in 100 namespaces, "
            f"seed {a['seed']}, ~10% of brokers hot)."
        )
    verdict = "met" if t["cli"] < 10 else "NOT met"
    return "\n".join(
        [
            scenario,
            "",
            figures.table(["step", "result"], [list(r) for r in rows]),
            "",
            f"Target: the whole CLI process under 10 s -> {verdict} ({t['cli']:.2f} s).",
        ]
    )


# blocks this script writes (figures.update); tests/test_docs_figures.py re-renders them from the JSON
BLOCKS = {"decide-threshold": render_table, "decide-globalplanner": render_table}
SCRIPT = "benchmarks/bench_decide.py"


if __name__ == "__main__":
    raise SystemExit(main())
