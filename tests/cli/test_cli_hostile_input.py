"""Hostile input to every CLI command: never a traceback, never a hang; invalid input exits 2 with one
line naming the problem and nothing on stdout; an environment problem exits 1 with one line.

Hypothesis generates the input: for ``decide``, ``split`` and ``bundles`` valid documents mutated at
random places (hostile values, huge/tiny/non-finite numbers, repeated keys, unknown keys, deleted
keys, deep nesting, truncated text) and arbitrary JSON; for ``plans``/``history`` arbitrary argv
against a real Postgres holding one plan. The CLI runs in process (``pulsar_rebalance.cli.main``)
for speed, with a hard per-case timeout; a few cases run as real subprocesses. The default run
generates ``QUICK`` cases per command, the ``slow`` mark ``THOROUGH`` (>= 1,000) and checks the count.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pulsar_rebalance.cli import main

pytestmark = pytest.mark.timeout(900)

QUICK = 60
THOROUGH = 1000
BUDGETS = [pytest.param(QUICK, id="quick"), pytest.param(THOROUGH, id="thorough", marks=pytest.mark.slow)]
CASE_TIMEOUT_S = 20  # one CLI call; a hang fails the case (and names its input)

MB = 1024 * 1024
NOW = 1_700_000_000_000


# ---------------------------------------------------------------------------------------------
# running the CLI
# ---------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str


class Hang(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    def expired(*_: object) -> None:
        raise Hang(f"the command did not finish within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_in_process(argv: list[str], stdin: str = "") -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    saved_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with _deadline(CASE_TIMEOUT_S), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse usage errors
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.stdin = saved_stdin
    return Outcome(code, out.getvalue(), err.getvalue())


def run_subprocess(argv: list[str], stdin: bytes = b"", env: dict[str, str] | None = None) -> Outcome:
    proc = subprocess.run(
        [sys.executable, "-m", "pulsar_rebalance.cli", *argv], input=stdin, capture_output=True, timeout=120, env=env
    )
    return Outcome(proc.returncode, proc.stdout.decode("utf-8", "replace"), proc.stderr.decode("utf-8", "replace"))


def assert_clean(outcome: Outcome, command: str, *, allowed: tuple[int, ...] = (0, 2)) -> None:
    """The contract every command keeps, whatever the input."""
    assert "Traceback" not in outcome.stderr, outcome.stderr
    assert "internal error" not in outcome.stderr, outcome.stderr
    assert outcome.code in allowed, outcome
    if outcome.code == 0:
        return
    assert outcome.stdout == "", outcome  # nothing half-printed
    lines = outcome.stderr.strip().split("\n")  # not splitlines(): \x1c-\x1e in an echoed argument are not line breaks
    if lines and lines[0].startswith("usage:"):  # argparse: usage, then one error line
        assert len(lines) >= 2 and ": error: " in lines[-1], outcome.stderr
        return
    assert len(lines) == 1, outcome.stderr
    prefix = f"pulsar-rebalance {command}: error: "
    assert lines[0].startswith(prefix), outcome.stderr
    assert len(lines[0]) > len(prefix) + 5, outcome.stderr  # says what is wrong


def assert_contract_outcome(outcome: Outcome, command: str) -> None:
    assert_clean(outcome, command)
    if outcome.code == 0:
        json.loads(outcome.stdout, parse_constant=lambda c: pytest.fail(f"{c} in the output"))
    else:  # a contract error names a field or the source, then the problem: "<field>: <message>"
        message = outcome.stderr.strip().split(": error: ", 1)[1]
        field, sep, problem = message.partition(": ")
        assert sep and field and problem, outcome.stderr


# ---------------------------------------------------------------------------------------------
# JSON with what json.dumps cannot write: repeated keys, raw tokens (NaN, 1e400, deep nesting)
# ---------------------------------------------------------------------------------------------
class Pairs(list):  # type: ignore[type-arg]
    """A JSON object written with these (key, value) pairs, in order, repeats included."""


@dataclass(frozen=True)
class Raw:
    """A verbatim JSON token."""

    text: str


def render(value: Any) -> str:
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, Pairs):
        return "{" + ", ".join(f"{json.dumps(k)}: {render(v)}" for k, v in value) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {render(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(render(v) for v in value) + "]"
    return json.dumps(value)


HOSTILE_NUMBERS = [
    0,
    -0.0,
    -1,
    1,
    5e-324,
    1e-45,
    1.4e-45,
    3.4e38,
    3.5e38,
    1e308,
    -1e308,
    1.7976931348623157e308,
    2**31,
    2**31 - 1,
    2**63 - 1,
    2**63,
    -(2**63) - 1,
    10**30,
    0.5,
    3.0,
    1e-300,
    123456789.123,
]
RAW_TOKENS = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" + "0" * 5000, "1e-400", "01", "+1", ".5", "0x10"]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(HOSTILE_NUMBERS),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    st.sampled_from(
        [
            "",
            "0x00000000",
            "0xffffffff",
            "0x100000000",
            "t/ns/0x00000000_0xffffffff",
            "ThresholdShedder",
            "range_equally_divide",
            "persistent://t/ns/x",
            "-1",
        ]
    ),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=8), kids, max_size=3)),
    max_leaves=8,
)
HOSTILE = st.one_of(
    JSON_VALUES,
    st.sampled_from(RAW_TOKENS).map(Raw),
    st.sampled_from([10, 200, 3000, 100_000]).map(lambda d: Raw("[" * d + "]" * d)),
)


def _positions(doc: Any, out: list[tuple[Any, Any]] | None = None) -> list[tuple[Any, Any]]:
    """Every (container, key/index) in ``doc``, depth first."""
    out = [] if out is None else out
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append((doc, k))
            _positions(v, out)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.append((doc, i))
            _positions(v, out)
    return out


@st.composite
def mutated_text(draw: st.DrawFn, bases: list[dict[str, Any]]) -> str:
    doc: Any = copy.deepcopy(draw(st.sampled_from(bases)))
    for _ in range(draw(st.integers(0, 3))):  # 0: the document as is (some cases must succeed)
        positions = _positions(doc)
        if not positions:
            break
        parent, key = draw(st.sampled_from(positions))
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "unknown", "repeat", "empty"]))
        if op == "replace":
            parent[key] = draw(HOSTILE)
        elif op == "delete":
            del parent[key]
        elif op == "empty":
            parent[key] = {} if isinstance(parent[key], dict) else [] if isinstance(parent[key], list) else ""
        elif op == "unknown" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=8))] = draw(HOSTILE)
        elif op == "repeat" and isinstance(parent, dict):
            # the member given twice (second value hostile or a copy): a broker twice, a field twice
            pairs = Pairs(parent.items())
            pairs.append((key, draw(st.one_of(st.just(copy.deepcopy(parent[key])), HOSTILE))))
            if parent is doc:
                doc = pairs
                break
            grand, gkey = next((c, k) for c, k in _positions(doc) if c[k] is parent)
            grand[gkey] = pairs
            break  # positions inside Pairs are not mutated further
    text = render(doc)
    if draw(st.integers(0, 9)) == 0:  # truncated or garbled text
        cut = draw(st.integers(0, max(0, len(text) - 1)))
        text = text[:cut] + draw(st.sampled_from(["", "}", "]", ",", "\x00", "\u2028", "'"]))
    return text


ANY_TEXT = st.one_of(st.text(max_size=40), JSON_VALUES.map(render), st.just(""), st.just("{}"), st.just("[]"))


# ---------------------------------------------------------------------------------------------
# valid documents to start from
# ---------------------------------------------------------------------------------------------
def _rng(i: int, n: int = 8) -> str:
    step = (1 << 32) // n
    return f"0x{i * step:08x}_0x{((i + 1) * step if i < n - 1 else 0xFFFFFFFF):08x}"


def _stats(thr: float) -> dict[str, Any]:
    return {
        "msgRateIn": 100.0,
        "msgThroughputIn": thr,
        "msgRateOut": 100.0,
        "msgThroughputOut": 0.0,
        "consumerCount": 1,
        "producerCount": 1,
        "topics": 3,
        "cacheSize": 0,
    }


def _report(cpu: float, bundles: dict[str, float]) -> dict[str, Any]:
    return {
        "cpu": {"usage": cpu, "limit": 100.0},
        "memory": {"usage": 1024.0, "limit": 4096.0},
        "bandwidthIn": {"usage": 0.0, "limit": 100.0},
        "bandwidthOut": {"usage": 0.0, "limit": 100.0},
        "lastUpdate": NOW,
        "lastStats": {b: _stats(t) for b, t in bundles.items()},
    }


def _cycle() -> dict[str, Any]:
    b1 = {f"t/ns/{_rng(i)}": (i + 1) * 10 * MB for i in range(3)}
    b2 = {f"t/ns/{_rng(i)}": 5 * MB for i in range(3, 6)}
    b3 = {f"t/ns/{_rng(i)}": 5 * MB for i in range(6, 8)}
    avg = {
        "maxSamples": 10,
        "numSamples": 10,
        "msgThroughputIn": 10 * MB,
        "msgThroughputOut": 0.0,
        "msgRateIn": 100,
        "msgRateOut": 100,
    }
    return {
        "brokers": {"b1:8080": _report(80, b1), "b2:8080": _report(10, b2), "b3:8080": _report(15, b3)},
        "bundleData": {
            f"t/ns/{_rng(0)}": {"shortTermData": avg, "longTermData": {**avg, "maxSamples": 1000}, "topics": 3}
        },
        "nowMs": NOW,
    }


def _first_cycle() -> dict[str, Any]:
    """No bundleData: derived from lastStats the way Pulsar's leader does on its first cycle."""
    cycle = _cycle()
    del cycle["bundleData"], cycle["nowMs"]
    return cycle


DECIDE_BASES = [
    {"shedding": "ThresholdShedder", "cycles": [_cycle()]},
    {"shedding": "ThresholdShedder", "cycles": [_first_cycle()]},
    {
        "shedding": "OverloadShedder",
        "assignDestinations": True,
        "seed": 7,
        "config": {"loadBalancerBrokerOverloadedThresholdPercentage": 50},
        "cycles": [_cycle(), _cycle()],
    },
    {"shedding": "UniformLoadShedder", "cycles": [_cycle()]},
    {"shedding": "AvgShedder", "cycles": [_cycle()]},
    {"shedding": "TransferShedder", "cycles": [_cycle()]},
    {"shedding": "GlobalPlanner", "cycles": [_cycle(), _cycle()]},
]
SPLIT_BASES = [
    {"algorithm": "range_equally_divide", "bundle": "public/default/0x00000000_0xffffffff"},
    {
        "algorithm": "topic_count_equally_divide",
        "bundle": "public/default/0x00000000_0xffffffff",
        "topics": ["persistent://public/default/a", "persistent://public/default/b", "persistent://public/default/c"],
    },
    {
        "algorithm": "specified_positions_divide",
        "bundle": "public/default/0x00000000_0x80000000",
        "positions": ["0x10000000", 536870912],
    },
    {
        "algorithm": "flow_or_qps_equally_divide",
        "bundle": "public/default/0x00000000_0xffffffff",
        "topics": {
            f"persistent://public/default/t{i}": {
                "msgRateIn": 100 * i,
                "msgRateOut": 0,
                "msgThroughputIn": i * MB,
                "msgThroughputOut": 0,
            }
            for i in range(1, 5)
        },
        "config": {"loadBalancerNamespaceBundleMaxMsgRate": 150, "loadBalancerNamespaceBundleMaxBandwidthMbytes": 100},
    },
]
BUNDLES_BASES = [
    {"numBundles": 4, "topics": ["persistent://public/default/my-topic", "persistent://public/default/test"]},
    {"boundaries": ["0x00000000", "0x40000000", "0x80000000", "0xffffffff"], "topics": ["persistent://t/n/x"]},
]


@pytest.mark.parametrize("doc", DECIDE_BASES + SPLIT_BASES + BUNDLES_BASES)
def test_the_starting_documents_are_valid(doc: dict[str, Any]) -> None:
    """The mutations start from documents the contract accepts (else the fuzzing would test little)."""
    command = "decide" if "cycles" in doc else "split" if "algorithm" in doc else "bundles"
    outcome = run_in_process([command, "-", "--compact"], render(doc))
    assert outcome.code == 0, outcome.stderr


# ---------------------------------------------------------------------------------------------
# the contracts
# ---------------------------------------------------------------------------------------------
def _fuzz_contract(command: str, bases: list[dict[str, Any]], examples: int) -> dict[int, int]:
    codes: dict[int, int] = {}

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    @given(text=st.one_of(mutated_text(bases), mutated_text(bases), mutated_text(bases), ANY_TEXT))
    def check(text: str) -> None:
        outcome = run_in_process([command, "-", "--compact"], text)
        assert_contract_outcome(outcome, command)
        codes[outcome.code] = codes.get(outcome.code, 0) + 1

    for base in bases:  # the unmutated documents too: every run sees accepted input, whatever the random draw
        check = example(text=render(base))(check)
    check()
    assert sum(codes.values()) >= examples, codes
    return codes


@pytest.mark.parametrize("examples", BUDGETS)
def test_decide_never_crashes(examples: int) -> None:
    codes = _fuzz_contract("decide", DECIDE_BASES, examples)
    assert codes.get(2, 0) > 0 and codes.get(0, 0) > 0, codes  # both outcomes were exercised


@pytest.mark.parametrize("examples", BUDGETS)
def test_split_never_crashes(examples: int) -> None:
    codes = _fuzz_contract("split", SPLIT_BASES, examples)
    assert codes.get(2, 0) > 0 and codes.get(0, 0) > 0, codes


@pytest.mark.parametrize("examples", BUDGETS)
def test_bundles_never_crashes(examples: int) -> None:
    codes = _fuzz_contract("bundles", BUNDLES_BASES, examples)
    assert codes.get(2, 0) > 0 and codes.get(0, 0) > 0, codes


# The cases of issue 11 item 5, each named (the fuzzing finds them too, but not by name).
def _decide_with(mutate: Callable[[dict[str, Any]], Any]) -> str:
    doc = copy.deepcopy(DECIDE_BASES[0])
    replaced = mutate(doc)
    return render(doc if replaced is None else replaced)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        pytest.param("[" * 100_000 + "]" * 100_000, "nests too deeply", id="deeply-nested"),
        pytest.param('{"shedding": "ThresholdShedder", "cycles": [{}]}', "cycles[0].brokers", id="empty-cycle"),
        pytest.param(
            _decide_with(lambda d: d["cycles"][0]["brokers"]["b1:8080"]["cpu"].update(usage=1e308)),
            "cycles[0].brokers.b1:8080.cpu: load report of broker b1:8080: cpu usage 1e+308",
            id="usage-1e308",
        ),
        pytest.param(
            _decide_with(lambda d: d["cycles"][0]["brokers"]["b1:8080"]["cpu"].update(limit=5e-324)),
            "not a finite float percentage",
            id="limit-5e-324",
        ),
        pytest.param(
            _decide_with(lambda d: d["cycles"][0]["brokers"]["b1:8080"]["cpu"].update(limit=Raw("Infinity"))),
            "Infinity is not valid JSON",
            id="infinity",
        ),
        pytest.param(
            _decide_with(lambda d: d["cycles"][0]["brokers"]["b1:8080"]["cpu"].update(usage=Raw("NaN"))),
            "NaN is not valid JSON",
            id="nan",
        ),
        pytest.param(
            _decide_with(lambda d: d["cycles"][0]["brokers"]["b1:8080"]["cpu"].update(usage=Raw("1e400"))),
            "1e400 is out of the range of a double",
            id="1e400",
        ),
        pytest.param(
            _decide_with(
                lambda d: d["cycles"][0].update(
                    brokers=Pairs(
                        [*d["cycles"][0]["brokers"].items(), ("b1:8080", d["cycles"][0]["brokers"]["b2:8080"])]
                    )
                )
            ),
            "cycles[0].brokers: key 'b1:8080' is given twice",
            id="broker-twice",
        ),
    ],
)
def test_issue_cases_exit_2_naming_the_problem(text: str, fragment: str) -> None:
    outcome = run_in_process(["decide", "-"], text)
    assert_contract_outcome(outcome, "decide")
    assert outcome.code == 2 and fragment in outcome.stderr, outcome


def test_huge_results_are_refused_not_crashed() -> None:
    """Finite inputs whose Pulsar arithmetic overflows a double: refused naming the result field, or computed."""

    def huge(doc: dict[str, Any]) -> None:
        for broker in doc["cycles"][0]["brokers"].values():
            for stats in broker["lastStats"].values():
                stats.update(msgThroughputIn=1.7e308, msgThroughputOut=1.7e308, msgRateIn=1.7e308)

    outcome = run_in_process(["decide", "-"], _decide_with(huge))
    assert_contract_outcome(outcome, "decide")


# ---------------------------------------------------------------------------------------------
# plans / history against a real database
# ---------------------------------------------------------------------------------------------
@contextlib.contextmanager
def database_env(url: str | None) -> Iterator[None]:
    """PULSAR_REBALANCE_DATABASE_URL = ``url`` (unset if None) and DATABASE_URL unset, restored after."""
    names = ("PULSAR_REBALANCE_DATABASE_URL", "DATABASE_URL")
    saved = {k: os.environ.pop(k, None) for k in names}
    if url is not None:
        os.environ["PULSAR_REBALANCE_DATABASE_URL"] = url
    try:
        yield
    finally:
        for k in names:
            os.environ.pop(k, None)
            if saved[k] is not None:
                os.environ[k] = saved[k]  # type: ignore[assignment]


@pytest.fixture(scope="module")
def plans_db(pg_server, tmp_path_factory) -> Iterator[tuple[str, str, Path]]:
    import uuid

    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import dispose_engines, make_engine, migrate, session_scope

    url = pg_server.create_database(f"t_{uuid.uuid4().hex[:12]}")
    migrate(url)
    with session_scope(make_engine(url)) as s:
        cid = repo.get_or_create_cluster(s, name="c1", admin_url="http://pulsar:8080")
        repo.start_run(s, run_id="run-1", cluster_id=cid, params={}, work_dir="/tmp/w")
        plan_id = repo.create_plan(
            s,
            run_id="run-1",
            cluster_id=cid,
            status="pending",
            expires_at=datetime.now(UTC) + timedelta(days=1),
            dry_run=False,
            strategies={"shedding": "ThresholdShedder"},
            config={},
            summary={
                "maxUsageBefore": 0.9,
                "brokers": {"b1:8080": {"before": {"usage": 0.9, "bundles": 2}, "after": {"usage": 0.5, "bundles": 1}}},
            },
            decision={},
            actions=[
                {
                    "kind": "unload",
                    "bundle": "public/default/0x00000000_0x40000000",
                    "source_broker": "b1:8080",
                    "destination_broker": "b2:8080",
                    "reason": "b1 overloaded",
                }
            ],
        )
    saved_admin = os.environ.get("PULSAR_ADMIN_URL")
    os.environ["PULSAR_ADMIN_URL"] = f"http://127.0.0.1:{_closed_port()}"  # plans resume: an unreachable cluster
    with database_env(url):
        yield url, plan_id, tmp_path_factory.mktemp("plots")
    os.environ.pop("PULSAR_ADMIN_URL")
    if saved_admin is not None:
        os.environ["PULSAR_ADMIN_URL"] = saved_admin
    dispose_engines(url)


ARG_TEXT = st.one_of(
    st.text(max_size=16),
    st.sampled_from(
        [
            "",
            "-",
            "--",
            "-1",
            "0",
            "10" * 20,
            "..",
            "/",
            "a/../..",
            "x\x00y",
            "\udcff",
            "1e3",
            " 5",
            "pending",
            "approved",
            "2026-11-22T02:00:00",
            "2026-13-45",
        ]
    ),
    st.integers().map(str),
)


@st.composite
def plans_argv(draw: st.DrawFn, plan_id: str, plot_dir: Path) -> list[str]:
    ident = draw(st.one_of(st.just(plan_id), ARG_TEXT))
    kind = draw(
        st.sampled_from(["list", "show", "approve", "reject", "stop", "abort", "resume", "history", "plans-bad"])
    )
    if kind == "list":
        argv = ["plans", "list"]
        if draw(st.booleans()):
            argv += [
                "--limit",
                draw(st.one_of(ARG_TEXT, st.sampled_from([str(10**30), "-1", "0", "1", "1000000", "1000001"]))),
            ]
        if draw(st.booleans()):
            argv += ["--status", draw(st.one_of(ARG_TEXT, st.sampled_from(["pending", "executed", "approved"])))]
        return argv
    if kind == "show":
        argv = ["plans", "show", ident]
        if draw(st.booleans()):
            argv.append("--json")
        if draw(st.integers(0, 3)) == 0:
            # always inside plot_dir (the test must not write elsewhere): no absolute paths, no ".."
            name = draw(
                st.one_of(
                    st.sampled_from(["", "x.exe", "p.png", "p.svg", "d/", "d/e/", ".", "noext", "p.PNG"]),
                    st.text(max_size=12).map(lambda t: t.replace("/", "_").replace("..", "__")),
                )
            )
            argv += ["--plot", str(plot_dir / name) if name else name]
        return argv
    if kind in ("approve", "reject", "stop", "abort", "resume"):
        argv = ["plans", kind, ident]
        if draw(st.booleans()):
            argv += ["--by", draw(ARG_TEXT)]
        if kind in ("approve", "reject") and draw(st.booleans()):
            argv += ["-m", draw(ARG_TEXT)]
        return argv
    if kind == "history":
        argv = ["history", draw(st.one_of(st.just("public/default/0x00000000_0x40000000"), ARG_TEXT))]
        if draw(st.booleans()):
            argv += ["--at", draw(ARG_TEXT)]
        if draw(st.booleans()):
            argv += ["--cluster", draw(st.one_of(st.just("c1"), ARG_TEXT))]
        if draw(st.booleans()):
            argv.append("--json")
        return argv
    return ["plans", *draw(st.lists(ARG_TEXT, max_size=4))]


@pytest.mark.parametrize("examples", BUDGETS)
def test_plans_and_history_never_crash(plans_db, examples: int) -> None:
    _, plan_id, plot_dir = plans_db
    codes: dict[int, int] = {}

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(argv=plans_argv(plan_id, plot_dir))
    def check(argv: list[str]) -> None:
        outcome = run_in_process(argv)
        # exit 1 only where the environment or the execution state is at fault: resuming against the
        # unreachable admin URL; stop/resume/abort refused in the plan's state (ExecutionError: operational)
        execution = argv[:2] in (["plans", "resume"], ["plans", "stop"], ["plans", "abort"])
        assert_clean(outcome, argv[0], allowed=(0, 1, 2) if execution else (0, 2))
        codes[outcome.code] = codes.get(outcome.code, 0) + 1

    check()
    assert sum(codes.values()) >= examples, codes
    assert codes.get(0, 0) > 0 and codes.get(2, 0) > 0, codes
    stray = [p for p in plot_dir.parent.iterdir() if p.suffix in (".png", ".svg", ".pdf")]
    assert stray == [], f"a chart was written outside --plot's directory: {stray}"


def test_plot_into_a_directory_writes_inside_it(plans_db, tmp_path) -> None:
    _, plan_id, _ = plans_db
    target = tmp_path / "charts"
    outcome = run_in_process(["plans", "show", plan_id, "--plot", f"{target}/"])
    assert outcome.code == 0, outcome
    assert (target / f"{plan_id}.png").read_bytes()[:4] == b"\x89PNG"
    assert not (tmp_path / "charts.png").exists()
    assert str(target / f"{plan_id}.png") in outcome.stderr
    existing = tmp_path / "existing"
    existing.mkdir()
    assert run_in_process(["plans", "show", plan_id, "--plot", str(existing)]).code == 0
    assert (existing / f"{plan_id}.png").exists()


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["plans", "show", "PLAN", "--plot", "x.exe"], "unsupported chart format '.exe'"),
        (["plans", "list", "--limit", str(10**30)], "--limit: must be between 1 and 1000000"),
        (["plans", "list", "--limit", "-1"], "--limit: must be between 1 and 1000000"),
        (["plans", "list", "--status", "bogus"], "unknown plan status 'bogus'"),
        (["plans", "show", "x\x00y"], "NUL"),
    ],
)
def test_plans_edges_exit_2_naming_the_problem(plans_db, argv: list[str], fragment: str) -> None:
    _, plan_id, _ = plans_db
    outcome = run_in_process([plan_id if a == "PLAN" else a for a in argv])
    assert_clean(outcome, argv[0])
    assert outcome.code == 2 and fragment in outcome.stderr, outcome


# ---------------------------------------------------------------------------------------------
# environment problems: exit 1, one line, no secret
# ---------------------------------------------------------------------------------------------
@st.composite
def broken_database_urls(draw: st.DrawFn, closed_port: int) -> str:
    scheme = draw(
        st.sampled_from(["postgresql", "postgres", "postgresql+psycopg2", "mysql", "http", "", "postgresql:"])
    )
    user = draw(st.sampled_from(["", "u@", "u:s3cret@", "u:s3cr:et@", ":s3cret@", "u:s3cret@@"]))
    host = draw(
        st.sampled_from(
            [
                f"127.0.0.1:{closed_port}",
                "127.0.0.1:notaport",
                "127.0.0.1:99999",
                "[::1",
                "[::1]:1",
                "",
                "127.0.0.1:-5",
                "/tmp/nowhere",
            ]
        )
    )
    db = draw(
        st.sampled_from(["/db", "", "/", "/db?host=/nonexistent", "/db?sslmode=bogus", "/db?connect_timeout=x", "/%zz"])
    )
    return f"{scheme}://{user}{host}{db}" if scheme else f"{user}{host}{db}"


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bad_or_unreachable_database_exits_1_with_one_line_and_no_password() -> None:
    seen: set[str] = set()

    @settings(max_examples=120, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        url=broken_database_urls(_closed_port()),
        argv=st.sampled_from(
            [["plans", "list"], ["plans", "show", "p-1"], ["plans", "approve", "p-1"], ["history", "b"]]
        ),
    )
    def check(url: str, argv: list[str]) -> None:
        os.environ["PULSAR_REBALANCE_DATABASE_URL"] = url
        outcome = run_in_process(argv)
        assert_clean(outcome, argv[0], allowed=(1,))
        assert "s3cr" not in outcome.stderr, outcome.stderr
        seen.add(outcome.stderr.split(": error: ", 1)[1][:40])

    with database_env(None):
        check()
    assert len(seen) > 3, seen  # the messages differ by problem


# ---------------------------------------------------------------------------------------------
# the top-level handler: a bug is one line (exit 1), with the traceback on request
# ---------------------------------------------------------------------------------------------
def test_an_unexpected_exception_is_one_line_and_the_traceback_is_one_env_var_away(monkeypatch) -> None:
    from pulsar_rebalance.cli import core_commands

    def broken(args: Any) -> int:
        return 1 // 0

    monkeypatch.setattr(core_commands, "_split", broken)
    outcome = run_in_process(["split", "-"], "{}")
    assert outcome.code == 1 and "Traceback" not in outcome.stderr
    assert outcome.stderr.strip() == (
        "pulsar-rebalance split: error: internal error: ZeroDivisionError: integer division "
        "or modulo by zero (set PULSAR_REBALANCE_DEBUG=1 for the traceback, and please report it)"
    )
    monkeypatch.setenv("PULSAR_REBALANCE_DEBUG", "1")
    debug = run_in_process(["split", "-"], "{}")
    assert debug.code == 1 and "Traceback" in debug.stderr and "ZeroDivisionError" in debug.stderr


# ---------------------------------------------------------------------------------------------
# a few as real processes (real stdin bytes, the real recursion limit, real exit codes)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("argv", "stdin", "code", "fragment"),
    [
        (["decide", "-"], b"[" * 200_000 + b"]" * 200_000, 2, "nests too deeply"),
        (["decide", "-"], b'{"cycles": [1], "cycles": [2]}', 2, "key 'cycles' is given twice"),
        (["split", "-"], b"\xff\xfe{}", 2, "not UTF-8"),
        (["bundles", "-"], b'{"numBundles": 1e400}', 2, "out of the range of a double"),
        (["plans", "list", "--limit", str(10**30)], b"", 2, "--limit"),
        (["plans", "show", "p-1", "--plot", "x.exe"], b"", 2, "unsupported chart format"),
    ],
)
def test_real_processes(argv: list[str], stdin: bytes, code: int, fragment: str) -> None:
    env = dict(os.environ, PULSAR_REBALANCE_DATABASE_URL=f"postgresql://u:s3cret@127.0.0.1:{_closed_port()}/db")
    outcome = run_subprocess(argv, stdin, env=env)
    assert_clean(outcome, argv[0])
    assert outcome.code == code and fragment in outcome.stderr, outcome


@pytest.mark.parametrize(
    ("admin_env", "fragment"),
    [
        ({}, "PULSAR_ADMIN_URL is not set"),
        ({"PULSAR_ADMIN_URL": "ftp://u:s3cret@x"}, "must start with http:// or https://"),
        ({"PULSAR_ADMIN_URL": "http://u:s3cret@127.0.0.1:1", "PULSAR_ADMIN_TIMEOUT": "soon"}, "PULSAR_ADMIN_TIMEOUT"),
        ({"PULSAR_ADMIN_URL": "http://u:s3cret@127.0.0.1:1", "PULSAR_ADMIN_TOKEN": "t"}, "give one of them"),
    ],
)
def test_a_misconfigured_admin_environment_is_exit_1_without_secrets(
    plans_db, monkeypatch, admin_env, fragment
) -> None:
    _, plan_id, _ = plans_db
    for name in ("PULSAR_ADMIN_URL", "PULSAR_ADMIN_TOKEN", "PULSAR_ADMIN_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in admin_env.items():
        monkeypatch.setenv(name, value)
    outcome = run_in_process(["plans", "resume", plan_id])
    assert_clean(outcome, "plans", allowed=(1,))
    assert fragment in outcome.stderr and "s3cret" not in outcome.stderr, outcome


def test_real_process_unreachable_database_exit_1() -> None:
    env = dict(os.environ, PULSAR_REBALANCE_DATABASE_URL=f"postgresql://u:s3cret@127.0.0.1:{_closed_port()}/db")
    outcome = run_subprocess(["plans", "list"], env=env)
    assert_clean(outcome, "plans", allowed=(1,))
    assert "Connection refused" in outcome.stderr and "s3cret" not in outcome.stderr and "u:***@" in outcome.stderr
