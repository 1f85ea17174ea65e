"""``pulsar-rebalance demo``: the README's main job on embedded defaults.

Starts (or reuses) an embedded PostgreSQL under ``--state-dir``, the simulated Pulsar cluster, and
Airflow with its metadata DB in the same Postgres; runs one complete ``pulsar_rebalance`` DAG run
with ``airflow dags test``; stops at the approval gate (interactive: asks; ``AUTO_APPROVE=1``:
approves by itself; otherwise: prints how to approve and waits); ends with one JSON line:
``{"plan_id", "status", "unloads_executed", "splits_executed", "max_usage_before", "max_usage_after"}``.

``pulsar-rebalance standalone``: the same wiring kept running for real use - Airflow's scheduler,
dag-processor, triggerer and api-server (what ``airflow standalone`` runs, started here so that every
listening socket is bound to ``--host``, default 127.0.0.1) and the simulator unless ``--admin-url``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from pulsar_rebalance.cli.plans import bounded_int
from pulsar_rebalance.urls import redact_userinfo

REPO = Path(__file__).resolve().parents[3]


def redact_url(url: str) -> str:
    """The URL with its password shown as *** (the embedded Postgres has none: printed as is, copy-pasteable)."""
    from sqlalchemy.engine import make_url

    from pulsar_rebalance.store.engine import redact_url as _redact

    return _redact(url) if make_url(url).password else url


def register(sub: argparse._SubParsersAction) -> None:
    from pulsar_rebalance.core.pulsar.shedders import DEFAULT_SHEDDER, SELECTABLE_SHEDDERS

    p = sub.add_parser("demo", help="run one complete rebalance on embedded defaults (the README's main job)")
    p.add_argument("--state-dir", default=str(REPO / ".state"), help="where Postgres data, logs and Airflow home live")
    p.add_argument("--seed", type=int, default=42, help="seed of the simulated cluster")
    p.add_argument("--brokers", type=int, default=5, help="simulated brokers")
    p.add_argument(
        "--auto-approve",
        action="store_true",
        default=os.environ.get("AUTO_APPROVE", "") in ("1", "true", "yes"),
        help="approve the plan without asking (also: AUTO_APPROVE=1)",
    )
    p.add_argument(
        "--strategy",
        default=DEFAULT_SHEDDER,
        choices=SELECTABLE_SHEDDERS,
        help=f"shedding strategy for this run (default: the DAG's, {DEFAULT_SHEDDER}; Pulsar's AvgShedder plans "
        "nothing on a first run: it sheds only after repeated hits)",
    )
    p.add_argument("--dry-run", action="store_true", help="plan and approve, but call no admin API")
    p.add_argument("--timeout-minutes", type=float, default=90.0, help="hard limit for the whole DAG run")
    p.set_defaults(func=run_demo)

    p = sub.add_parser(
        "standalone",
        help="a local Airflow stack (scheduler, dag-processor, triggerer, api-server + embedded Postgres + simulator)",
    )
    p.add_argument("--state-dir", default=str(REPO / ".state"), help="where Postgres data, logs and Airflow home live")
    p.add_argument("--port", type=bounded_int(1, 65535), default=8080, help="Airflow UI / API port")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="interface the Airflow API server and the simulator listen on (default 127.0.0.1: this "
        "machine only; 0.0.0.0 exposes the UI and its admin login to the network)",
    )
    p.add_argument(
        "--admin-url",
        default=None,
        help="a real Pulsar admin URL instead of the simulator (token from $PULSAR_ADMIN_TOKEN)",
    )
    p.add_argument("--seed", type=int, default=None, help="seed of a new simulated cluster (default 42)")
    p.add_argument("--brokers", type=int, default=None, help="brokers of a new simulated cluster (default 5)")
    p.add_argument(
        "--scenario",
        default=None,
        metavar="NAME",
        help="a new simulated cluster that is one of the balance benchmark's scenarios at its first cycle "
        "(e.g. one-hot-broker, heterogeneous; --seed picks its draw; see docs/simulator.md)",
    )
    p.add_argument(
        "--load-model",
        default=None,
        metavar="NAME",
        help="how a new simulated cluster's traffic turns into the usage its brokers report (default linear; "
        "convex-cpu, nic-bound, heterogeneous-capacity, random-<k>, ...; see docs/simulator.md)",
    )
    p.add_argument(
        "--clock",
        type=float,
        default=None,
        metavar="SPEED",
        help="with --scenario: run its clock at SPEED simulated minutes per minute (60: an hour a minute), so "
        "load and brokers move on between the DAG's runs; such a cluster is new at every start, not kept",
    )
    p.add_argument(
        "--fresh-cluster",
        action="store_true",
        help=f"discard the simulated cluster kept in STATE_DIR/{SIMULATOR_STATE} (brokers, addresses, "
        "ownership, bundle ranges, load) and generate a new one",
    )
    p.add_argument(
        "--schedule",
        nargs="?",
        const="@hourly",
        default=None,
        metavar="CRON",
        help="give the DAG a schedule (default when given: @hourly; a cron expression or preset); "
        "without it the DAG has none and runs only when triggered",
    )
    p.add_argument(
        "--user",
        action="append",
        default=[],
        type=airflow_user,
        metavar="NAME:ROLE",
        help="add an Airflow login (repeatable; ROLE one of viewer, user, op, admin; answering the approval "
        "gate needs user or above), e.g. a second approver: --user bob:user",
    )
    p.set_defaults(func=run_standalone)


SIMULATOR_STATE = "simulator-cluster.json"
"""The simulated cluster ``standalone`` keeps under its state dir (the simulator's ``--state-file``)."""

AIRFLOW_ROLES = ("viewer", "user", "op", "admin")
"""SimpleAuthManager's roles, weakest first."""


def airflow_user(text: str) -> tuple[str, str]:
    """``NAME:ROLE`` of ``--user``: a SimpleAuthManager login name and one of its roles."""
    import re

    name, sep, role = text.partition(":")
    if not sep or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}", name):
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME:ROLE (NAME: letters, digits, . _ @ -)")
    if role not in AIRFLOW_ROLES:
        raise argparse.ArgumentTypeError(f"role {role!r} of {name!r} is not one of {', '.join(AIRFLOW_ROLES)}")
    return name, role


def airflow_users(extra: list[tuple[str, str]]) -> str:
    """The value of ``[core] simple_auth_manager_users``: ``admin:admin`` and each ``--user``."""
    users = [("admin", "admin"), *extra]
    names = [n for n, _ in users]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        from pulsar_rebalance.errors import ConfigError

        raise ConfigError(f"--user names must be unique and not 'admin' (the built-in login): {duplicates}", key="user")
    return ",".join(f"{n}:{r}" for n, r in users)


def _say(msg: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_demo(args: argparse.Namespace) -> int:
    from pulsar_rebalance.store.engine import migrate

    state = Path(args.state_dir).resolve()
    (state / "logs").mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    server_url, pg = _postgres(state)
    app_url = pg.create_database("pulsar_rebalance") if pg else server_url
    airflow_db = pg.create_database("airflow") if pg else os.environ.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "")
    migrate(app_url)
    _say(f"postgres ready, schema migrated ({time.monotonic() - t0:.1f}s)")

    sim, sim_info = _simulator(state, args)
    _say(f"simulated Pulsar cluster: {len(sim_info['brokers'])} brokers, admin API at {sim_info['admin_url']}")
    env = _airflow_env(state, app_url, airflow_db, sim_info["admin_url"])
    # a small simulated cluster: every Spark job is seconds long, so its driver JIT-compiles with C1 only
    # (pipeline/jvm.py; the class-data-sharing archive applies too, built by scripts/install.sh)
    env.setdefault("PULSAR_REBALANCE_SPARK_JIT", "c1")
    try:
        _run(["airflow", "db", "migrate"], env, state / "logs" / "airflow-db-migrate.log", timeout=600)
        _say(f"airflow metadata migrated ({time.monotonic() - t0:.1f}s)")
        conf = {"shedding_strategy": args.strategy, "dry_run": args.dry_run, "approval_timeout_minutes": 60}
        log_path = state / "logs" / f"dag-run-{time.strftime('%Y%m%d-%H%M%S')}.log"
        _say(f"running DAG pulsar_rebalance (each Spark task ~15 s; log: {log_path})")
        started = time.time()
        proc = _spawn(["airflow", "dags", "test", "pulsar_rebalance", "-c", json.dumps(conf)], env, log_path)
        os.environ["PULSAR_REBALANCE_DATABASE_URL"] = app_url
        result = _watch(proc, started, args, env, deadline=time.monotonic() + args.timeout_minutes * 60)
        if proc.returncode not in (0, None):
            _say(f"the DAG run failed (exit {proc.returncode}); see {log_path}")
        if result.get("plan_id") and result.get("status") != "empty":
            _chart(result["plan_id"], state / "plans" / f"{result['plan_id']}.png")
        print(json.dumps(result), flush=True)
        return 0 if result.get("status") not in (None, "failed", "missing") and proc.returncode == 0 else 1
    finally:
        _terminate(sim, grace=10)


def _postgres(state: Path):
    from pulsar_rebalance.store.engine import database_url

    if os.environ.get("PULSAR_REBALANCE_DATABASE_URL") or os.environ.get("DATABASE_URL"):
        return database_url(), None
    from pulsar_rebalance.store.embedded import EmbeddedPostgres

    pg = EmbeddedPostgres(state / "pg")
    return pg.start(), pg


def _simulator(state: Path, args, state_file: Path | None = None) -> tuple[subprocess.Popen, dict[str, Any]]:
    """Start the simulator; with ``state_file``, the cluster saved there (same brokers, addresses,
    ownership, ranges and load; the simulator saves every change to it) or a new one saved there."""
    ready = state / "simulator.json"
    ready.unlink(missing_ok=True)
    log = open(state / "logs" / "simulator.log", "ab")
    cmd = [sys.executable, "-m", "pulsar_rebalance.cli", "simulator", "--port-base", "0", "--ready-file", str(ready)]
    cmd += ["--host", getattr(args, "host", "127.0.0.1")]
    if args.seed is not None:
        cmd += ["--seed", str(args.seed)]
    if args.brokers is not None:
        cmd += ["--brokers", str(args.brokers)]
    for flag in ("scenario", "load_model"):  # standalone's: a new cluster's (the simulator refuses a kept one's)
        if getattr(args, flag, None) is not None:
            cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    if getattr(args, "clock", None) is not None:
        cmd += ["--clock", str(args.clock)]
    if state_file is not None:
        cmd += ["--state-file", str(state_file)]
    proc = subprocess.Popen(
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if ready.exists() and ready.stat().st_size:
            try:
                return proc, json.loads(ready.read_text())
            except json.JSONDecodeError:
                pass
        if proc.poll() is not None:
            hint = (
                f" (it was restoring the cluster kept in {state_file}; --fresh-cluster starts a new one)"
                if state_file is not None and state_file.exists()
                else ""
            )
            raise SystemExit(
                f"the simulator exited with {proc.returncode}; see {state / 'logs' / 'simulator.log'}{hint}"
            )
        time.sleep(0.2)
    proc.kill()
    raise SystemExit("the simulator did not become ready within 60 s")


def _airflow_env(
    state: Path, app_url: str, airflow_db: str, admin_url: str, port: int = 8080, host: str = "127.0.0.1"
) -> dict[str, str]:
    env = dict(os.environ)
    admin_conn: dict[str, Any] = {"conn_type": "http", "host": admin_url}
    if env.get("PULSAR_ADMIN_TOKEN"):
        admin_conn["password"] = env["PULSAR_ADMIN_TOKEN"]
    bindir = str(Path(sys.executable).parent)
    env.update(
        {
            "PATH": bindir + os.pathsep + env.get("PATH", ""),
            "AIRFLOW_HOME": str(state / "airflow"),
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": airflow_db,
            "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[*]"}),
            "AIRFLOW_CONN_PULSAR_ADMIN_DEFAULT": json.dumps(admin_conn),
            "AIRFLOW_CONN_PULSAR_REBALANCE_DB": json.dumps({"conn_type": "postgres", "extra": {"url": app_url}}),
            "PULSAR_REBALANCE_WORK_DIR": str(state / "work"),
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "AIRFLOW__API__HOST": host,
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{_client_url(host, port)}/execution/",
        }
    )
    env.setdefault(JWT_SECRET_ENV, jwt_secret(state))
    return env


JWT_SECRET_ENV = "AIRFLOW__API_AUTH__JWT_SECRET"


def jwt_secret(state: Path) -> str:
    """The key Airflow signs its API tokens with (``[api_auth] jwt_secret``), kept in ``STATE/airflow/jwt_secret``
    (mode 0600; made on first use, the same for every process and restart). Airflow's own generated default is
    16 random bytes, which PyJWT flags on every token it signs or checks (``InsecureKeyLengthWarning``: HS512
    wants 64 bytes or more); this is 64. A value already in the environment is kept instead (``_airflow_env``)."""
    path = state / "airflow" / "jwt_secret"
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    secret = secrets.token_urlsafe(64)
    with os.fdopen(fd, "w") as f:
        f.write(secret + "\n")
    return secret


def _client_url(host: str, port: int) -> str:
    """How a local client reaches a server bound to ``host`` (a wildcard address means this machine)."""
    client_host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://[{client_host}]:{port}" if ":" in client_host else f"http://{client_host}:{port}"


# The components `airflow standalone` runs, started by us instead so that nothing listens beyond
# --host: the scheduler and the triggerer each start a log server bound to every interface (Airflow's
# serve_logs has no host setting), so they run with --skip-serve-logs - every component shares this
# machine's log folder, from which the API server reads task and trigger logs directly.
_AIRFLOW_COMPONENTS: dict[str, list[str]] = {
    "scheduler": ["scheduler", "--skip-serve-logs"],
    "dag-processor": ["dag-processor"],
    "triggerer": ["triggerer", "--skip-serve-logs"],
    "api-server": ["api-server"],  # host and port from AIRFLOW__API__HOST / AIRFLOW__API__PORT
}


def run_standalone(args: argparse.Namespace) -> int:
    """Run ``airflow standalone`` wired to the state DB and a Pulsar admin API until Ctrl-C / SIGTERM."""
    from pulsar_rebalance.store.engine import migrate

    users = airflow_users(args.user)  # a bad --user fails before anything starts
    state = Path(args.state_dir).resolve()
    (state / "logs").mkdir(parents=True, exist_ok=True)
    server_url, pg = _postgres(state)
    app_url = pg.create_database("pulsar_rebalance") if pg else server_url
    airflow_db = pg.create_database("airflow") if pg else os.environ.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "")
    migrate(app_url)
    sim = None
    admin_url = args.admin_url
    if not admin_url:
        sim, info = start_cluster(state, args)
        admin_url = info["admin_url"]
    env = standalone_env(state, app_url, airflow_db, admin_url, args, users)
    logs = state / "logs"
    procs: dict[str, subprocess.Popen] = {}
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        _run(["airflow", "db", "migrate"], env, logs / "airflow-db-migrate.log", timeout=600)
        for name, cmd in _AIRFLOW_COMPONENTS.items():
            procs[name] = _spawn(["airflow", *cmd], env, logs / f"airflow-{name}.log")
        url = _client_url(args.host, args.port)
        if _wait_http(f"{url}/api/v2/monitor/health", procs, stop, timeout=300):
            pw = Path(env["AIRFLOW_HOME"]) / "simple_auth_manager_passwords.json.generated"
            logins = ", ".join(f"{n} ({r})" for n, r in (u.split(":") for u in users.split(",")))
            when = (
                f"runs on schedule {args.schedule} while unpaused (a scheduled run leaves a plan that awaits a "
                "decision alone)"
                if args.schedule
                else "has no schedule: it runs only when triggered (start with --schedule for hourly runs)"
            )
            _say(
                f"Airflow is up: {url}  (logins: {logins}; their passwords are in {pw}). DAG pulsar_rebalance "
                f"{when}. Trigger it from the UI (the trigger form unpauses it: a paused DAG starts no run); "
                "review the plan under Browse -> Rebalance plans and decide it under Browse -> Required Actions. "
                "From a shell: "
                f"PULSAR_REBALANCE_DATABASE_URL='{redact_url(app_url)}' .venv/bin/pulsar-rebalance plans list"
            )
            print(
                json.dumps(
                    {
                        "airflow_url": url,
                        "admin_url": redact_userinfo(admin_url),
                        "logs": str(logs),
                        "users": [u.split(":")[0] for u in users.split(",")],
                        "passwords_file": str(pw),
                        "schedule": args.schedule,
                        "simulator_state": str(state / SIMULATOR_STATE) if sim is not None else None,
                        "pids": {name: p.pid for name, p in procs.items()},
                    }
                ),
                flush=True,
            )
            while not stop.is_set() and all(p.poll() is None for p in procs.values()):
                stop.wait(1.0)
        exited = {name: p.returncode for name, p in procs.items() if p.poll() is not None}
        if exited and not stop.is_set():
            _say(f"stopped because {', '.join(exited)} exited ({exited}); see {logs}/airflow-*.log")
        return 0 if stop.is_set() or not exited else 1
    finally:
        _say("stopping")
        _terminate_all([*procs.values(), *([sim] if sim is not None else [])])


def start_cluster(state: Path, args: argparse.Namespace) -> tuple[subprocess.Popen, dict[str, Any]]:
    """The simulated cluster of ``standalone``: the one kept in ``STATE_DIR/simulator-cluster.json`` (same
    broker names and ports, ownership, bundle ranges and load as when it stopped; every change is saved
    there), or a new one when there is none or ``--fresh-cluster``."""
    clock = getattr(args, "clock", None)
    if clock is not None:  # a running clock cannot be resumed: a new cluster, not kept
        if getattr(args, "scenario", None) is None:
            from pulsar_rebalance.errors import ConfigError

            raise ConfigError("--clock runs a scenario's clock: give --scenario NAME too", key="clock")
        sim, info = _simulator(state, args)
        _say(
            f"simulated Pulsar cluster {info['cluster']}: {len(info['brokers'])} brokers, admin API at "
            f"{info['admin_url']} (scenario {args.scenario}, its clock at {clock:g} simulated minutes a minute; "
            f"new at every start, not kept; brokers joining or stopping: {state / 'logs' / 'simulator.log'})"
        )
        return sim, info
    state_file = state / SIMULATOR_STATE
    if getattr(args, "fresh_cluster", False) and state_file.exists():
        kept = state_file.with_name(f"{SIMULATOR_STATE}.{time.strftime('%Y%m%d-%H%M%S')}.old")
        state_file.replace(kept)
        _say(f"--fresh-cluster: the previous simulated cluster is kept aside in {kept}")
    restored = state_file.exists()
    sim, info = _simulator(state, args, state_file=state_file)
    _say(
        f"simulated Pulsar cluster {info['cluster']}: {len(info['brokers'])} brokers, admin API at "
        f"{info['admin_url']} ({'restored from' if restored else 'new, kept in'} {state_file})"
    )
    return sim, info


def standalone_env(
    state: Path, app_url: str, airflow_db: str, admin_url: str, args: argparse.Namespace, users: str
) -> dict[str, str]:
    """Airflow's environment for ``standalone``: LocalExecutor, SimpleAuthManager with ``users``, and the
    DAG's schedule (none unless ``--schedule``)."""
    env = _airflow_env(state, app_url, airflow_db, admin_url, port=args.port, host=args.host)
    env["AIRFLOW__CORE__EXECUTOR"] = "LocalExecutor"
    env["AIRFLOW__CORE__AUTH_MANAGER"] = (
        "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
    )
    env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] = users
    env["PULSAR_REBALANCE_SCHEDULE"] = args.schedule or ""  # read by the DAG file: "" = no schedule
    return env


def _wait_http(url: str, procs: dict[str, subprocess.Popen], stop: threading.Event, timeout: float) -> bool:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not stop.is_set():
        exited = [name for name, p in procs.items() if p.poll() is not None]
        if exited:
            _say(f"airflow {', '.join(exited)} exited before the API server was healthy")
            return False
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        stop.wait(1.0)
    return False


def _terminate(proc: subprocess.Popen, grace: float = 20.0) -> None:
    """SIGTERM the process group (airflow standalone's children included), SIGKILL after ``grace``."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        _kill(proc)
    except ProcessLookupError:
        pass


def _terminate_all(procs: list[subprocess.Popen], grace: float = 30.0) -> None:
    """SIGTERM every process group at once, then wait for all; SIGKILL what is left after ``grace``."""
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        _kill(proc)  # also whatever the leader left behind in its group


def _run(cmd: list[str], env: dict[str, str], log: Path, timeout: float) -> None:
    with open(log, "ab") as fh:
        proc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {proc.returncode}); see {log}")


def _spawn(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    fh = open(log, "ab")
    return subprocess.Popen(
        cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
    )


def _kill(proc: subprocess.Popen, settle: float = 10.0) -> None:
    """``airflow dags test`` ignores SIGTERM: kill the whole process group, and return once the group is
    gone (its members other than the leader are reaped by init, not by us: wait for that, bounded)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)  # polling a condition (the group has no member left), bounded by the deadline


def _answer_gate(env: dict[str, str], plan_id: str, decision: str, user: str, comment: str) -> None:
    """Answer the plan's Required Action through Airflow's own API (in a process with Airflow's env)."""
    subprocess.run(
        [sys.executable, "-m", "pulsar_rebalance.cli.airflow_api", plan_id, decision, user, comment],
        env={
            **env,
            "PULSAR_REBALANCE_DATABASE_URL": os.environ["PULSAR_REBALANCE_DATABASE_URL"],
            "PYTHONWARNINGS": "ignore",
        },
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=300,
    )


def _watch(proc: subprocess.Popen, started: float, args, env: dict[str, str], *, deadline: float) -> dict[str, Any]:
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import database_url, make_engine, session_scope

    engine = make_engine(database_url())
    stage, plan_id, asked = None, None, False
    while proc.poll() is None:
        if time.monotonic() > deadline:
            _say("hard timeout reached: stopping the DAG run")
            _kill(proc)
            break
        with session_scope(engine) as s:
            run = repo.latest_run(s, since_epoch=started)
            plan = repo.plan_for_run(s, run_id=run.run_id) if run else None
        if run and run.stage != stage:
            stage = run.stage
            _say(f"run {run.run_id}: {stage} done")
        if plan and plan.plan_id != plan_id:
            plan_id = plan.plan_id
            s_ = plan.summary or {}
            _say(
                f"plan {plan_id}: {s_.get('numBundleSplits', 0)} split(s), {s_.get('numBundleUnloads', 0)} unload(s); "
                f"max usage {100 * (s_.get('maxUsageBefore') or 0):.1f}% -> {100 * (s_.get('maxUsageAfterPredicted') or 0):.1f}% predicted"
            )
        if plan and plan.status == "pending" and plan.gate and not asked:  # waiting at the Airflow gate
            asked = True
            if args.auto_approve:
                _answer_gate(env, plan.plan_id, "approved", "quickstart", "unattended demo run (AUTO_APPROVE=1)")
                _say(f"plan {plan.plan_id} approved at the Airflow gate automatically (AUTO_APPROVE=1)")
            else:
                _ask(plan.plan_id, env)
        time.sleep(1.0)
    return _result(engine, plan_id)


def _ask(plan_id: str, env: dict[str, str]) -> None:
    from pulsar_rebalance.cli import main as cli_main

    cli_main(["plans", "show", plan_id])
    _say(
        "the plan is waiting at the Airflow approval gate (await_approval). Answer here, or run "
        "`.venv/bin/pulsar-rebalance standalone` next time to decide in the Airflow UI (Browse -> Required Actions)."
    )
    if not sys.stdin.isatty():
        _say("stdin is not a terminal: waiting for a decision from elsewhere (or run with AUTO_APPROVE=1)")
        return

    def prompt() -> None:
        while True:
            answer = input("approve / reject this plan? [a/r] ").strip().lower()
            if answer in ("a", "approve", "r", "reject"):
                try:
                    _answer_gate(
                        env,
                        plan_id,
                        "approved" if answer.startswith("a") else "rejected",
                        os.environ.get("PULSAR_REBALANCE_USER") or "demo-operator",
                        "answered at the demo prompt",
                    )
                except subprocess.CalledProcessError as exc:  # decided elsewhere meanwhile, or refused
                    _say(f"the answer was not taken ({exc})")
                return

    threading.Thread(target=prompt, daemon=True).start()


def _result(engine, plan_id: str | None) -> dict[str, Any]:
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import session_scope

    if plan_id is None:
        return {
            "plan_id": None,
            "status": "missing",
            "unloads_executed": 0,
            "splits_executed": 0,
            "max_usage_before": None,
            "max_usage_after": None,
        }
    with session_scope(engine) as s:
        plan = repo.get_plan(s, plan_id=plan_id)
    res = plan.result or {}
    summary = plan.summary or {}
    done = [a for a in plan.actions if a.state == "completed"]
    return {
        "plan_id": plan.plan_id,
        "status": plan.status,
        "unloads_executed": sum(a.kind == "unload" for a in done),
        "splits_executed": sum(a.kind == "split" for a in done),
        "max_usage_before": _round(summary.get("maxUsageBefore")),
        "max_usage_after": _round(
            res.get("max_usage_after")
            if res
            else (summary.get("maxUsageBefore") if plan.status in ("rejected", "expired", "empty") else None)
        ),
    }


def _chart(plan_id: str, path: Path) -> None:
    from pulsar_rebalance.cli.plot import plot_plan
    from pulsar_rebalance.store import repository as repo
    from pulsar_rebalance.store.engine import database_url, make_engine, session_scope

    with session_scope(make_engine(database_url())) as s:
        plan = repo.get_plan(s, plan_id=plan_id)
    _say(f"per-broker usage chart (before / predicted / measured): {plot_plan(plan, path)}")


def _round(x: float | None) -> float | None:
    return None if x is None else round(float(x), 4)
