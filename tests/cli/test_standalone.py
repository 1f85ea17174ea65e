"""`pulsar-rebalance standalone`: the local Airflow stack comes up wired to Postgres and the simulator,
serves the UI/API on loopback only, and stops cleanly (with every component's children) on SIGTERM."""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from tests.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(pids: set[int]) -> list[tuple[int, str, str, int]]:
    """(pid, process name, ip, port) of every TCP socket in LISTEN state owned by ``pids``."""
    out = []
    for conn in psutil.net_connections(kind="inet"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids:
            out.append((conn.pid, psutil.Process(conn.pid).name(), conn.laddr.ip, conn.laddr.port))
    return out


def _tree(pid: int) -> set[int]:
    root = psutil.Process(pid)
    return {pid, *(c.pid for c in root.children(recursive=True))}


def _postmaster_pid(state: Path) -> int:
    pid_file = next(state.glob("pg/**/postmaster.pid"))
    return int(pid_file.read_text().split()[0])


def test_standalone_stack_listens_on_loopback_only_and_stops_cleanly(tmp_path):
    port = _free_port()
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.pop("PULSAR_REBALANCE_DATABASE_URL", None)
    env.pop("DATABASE_URL", None)
    proc = subprocess.Popen(
        [
            *[sys.executable, "-m", "pulsar_rebalance.cli", "standalone", "--state-dir", str(state)],
            *["--port", str(port), "--user", "bob:user"],
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    lines = []
    ready = None
    try:
        deadline = time.monotonic() + 420
        while time.monotonic() < deadline and proc.poll() is None:
            line = proc.stdout.readline()  # blocks until the next line; the process prints progress
            lines.append(line)
            if line.startswith("{"):
                ready = json.loads(line)
                break
        assert ready, "".join(lines[-40:])
        assert ready["airflow_url"] == f"http://127.0.0.1:{port}"
        assert httpx.get(f"{ready['airflow_url']}/api/v2/monitor/health", timeout=10).status_code == 200
        assert httpx.get(f"{ready['admin_url']}/admin/v2/brokers", timeout=10).json()  # the simulator answers
        # the second login exists in the running Airflow: its password was generated, and it logs in
        assert ready["users"] == ["admin", "bob"] and ready["schedule"] is None
        password = json.loads(Path(ready["passwords_file"]).read_text())["bob"]
        token = httpx.post(
            f"{ready['airflow_url']}/auth/token", json={"username": "bob", "password": password}, timeout=10
        )
        assert token.status_code == 201 and token.json()["access_token"], token.text
        assert Path(ready["simulator_state"]).is_file()  # the cluster is kept for the next start

        # Every listening socket of the stack - our process, the four Airflow components and all their
        # children (uvicorn workers, executor workers), the simulator, the Postgres server - is on loopback.
        pids = _tree(proc.pid) | {_postmaster_pid(state)}
        listening = _listening(pids)
        ports = {p for *_, p in listening}
        assert port in ports, listening  # the API server is among them (the check sees real sockets)
        assert len(ports) >= 6, listening  # API server + 5 simulated brokers
        exposed = [s for s in listening if not ipaddress.ip_address(s[2]).is_loopback]
        assert exposed == [], f"listening beyond loopback: {exposed}"

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0
        for _name, pid in ready["pids"].items():  # each component ran in its own process group: all gone
            with pytest.raises(ProcessLookupError):
                os.killpg(pid, 0)
        with pytest.raises(ProcessLookupError):  # nothing of our own process group is left behind
            os.killpg(proc.pid, 0)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for pid in (ready or {}).get("pids", {}).values():
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


# --------------------------------------------------------------------------- the kept simulated cluster


def _standalone_args(state: Path, *extra: str):
    from pulsar_rebalance.cli import build_parser

    return build_parser().parse_args(["standalone", "--state-dir", str(state), *extra])


def _cluster_view(admin_url: str) -> dict:
    """What the running simulator serves over HTTP: brokers, bundle boundaries, ownership and load."""
    from pulsar_rebalance.pipeline.collect import collect_snapshot
    from pulsar_rebalance.pulsar_admin import PulsarAdminClient

    with PulsarAdminClient.from_url(admin_url, retries=0) as client:
        snap = collect_snapshot(client, topic_stats=False)
    return {
        "cluster": snap.cluster,
        "brokers": sorted(snap.brokers),
        "namespaces": {ns: list(b) for ns, b in snap.namespaces.items()},
        "ownership": dict(snap.ownership),
        "msgRateIn": {b: r["msgRateIn"] for b, r in snap.load_reports.items()},
    }


def _stop(proc: subprocess.Popen, sig: int) -> None:
    os.killpg(proc.pid, sig)
    proc.wait(timeout=30)


def test_standalone_keeps_its_simulated_cluster_across_restarts(tmp_path):
    """Restarted from the same state dir, the simulator serves the same brokers (names = addresses),
    bundle ranges, ownership and load as when it stopped - including a split and an unload made
    through the admin API, and after a SIGKILL (every change is saved when made)."""
    from pulsar_rebalance.cli.quickstart import SIMULATOR_STATE, start_cluster
    from pulsar_rebalance.pulsar_admin import PulsarAdminClient

    state = tmp_path / "state"
    (state / "logs").mkdir(parents=True)
    sim, info = start_cluster(state, _standalone_args(state))
    try:
        with PulsarAdminClient.from_url(info["admin_url"], retries=0) as admin:
            before = _cluster_view(info["admin_url"])
            bundle, owner = sorted(before["ownership"].items())[0]
            ns, rng = bundle.rsplit("/", 1)
            destination = next(b for b in before["brokers"] if b != owner)
            admin.split_bundle(ns, rng)
            admin.unload_bundle("tenant-b/events", "0x00000000_0x40000000", destination_broker=destination)
        changed = _cluster_view(info["admin_url"])
        assert changed["ownership"] != before["ownership"] and changed["namespaces"] != before["namespaces"]
        assert changed["ownership"]["tenant-b/events/0x00000000_0x40000000"] == destination
    finally:
        _stop(sim, signal.SIGKILL)  # no chance to save at shutdown: what was saved at each change must do

    sim, again = start_cluster(state, _standalone_args(state))
    try:
        assert again["brokers"] == info["brokers"] and again["admin_url"] == info["admin_url"]
        assert _cluster_view(again["admin_url"]) == changed
    finally:
        _stop(sim, signal.SIGTERM)
    assert json.loads((state / SIMULATOR_STATE).read_text())["owners"] == changed["ownership"]

    sim, fresh = start_cluster(state, _standalone_args(state, "--fresh-cluster"))
    try:  # a new cluster: generated ownership again, on new ports; the old one kept aside
        view = _cluster_view(fresh["admin_url"])
        assert fresh["brokers"] != info["brokers"] and len(view["ownership"]) == len(before["ownership"])
        assert len(list(state.glob(f"{SIMULATOR_STATE}.*.old"))) == 1
    finally:
        _stop(sim, signal.SIGTERM)


def test_standalone_serves_a_benchmark_scenario_under_a_load_model_and_keeps_it(tmp_path):
    from pulsar_rebalance.cli.quickstart import SIMULATOR_STATE, start_cluster
    from pulsar_rebalance.pulsar_admin import PulsarAdminClient

    state = tmp_path / "state"
    (state / "logs").mkdir(parents=True)
    args = _standalone_args(state, "--scenario", "heterogeneous", "--load-model", "nic-bound", "--seed", "2")
    sim, info = start_cluster(state, args)
    try:
        assert info["load_model"] == "nic-bound" and len(info["brokers"]) == 8
        with PulsarAdminClient.from_url(info["admin_url"], retries=0) as admin:
            limits = {admin.load_report(b)["bandwidthOut"]["limit"] for b in info["brokers"]}
        assert limits == {0.4 * 1000 * 1024, 0.4 * 2000 * 1024}  # nic-bound's NICs; heterogeneous: one broker 2x
    finally:
        _stop(sim, signal.SIGTERM)
    assert json.loads((state / SIMULATOR_STATE).read_text())["loadModel"] == "nic-bound"
    sim, again = start_cluster(state, _standalone_args(state))  # kept: no flag needed
    try:
        assert again["load_model"] == "nic-bound" and again["brokers"] == info["brokers"]
    finally:
        _stop(sim, signal.SIGTERM)
    with pytest.raises(SystemExit, match="--fresh-cluster starts a new one"):  # a kept cluster is not replaced
        start_cluster(state, _standalone_args(state, "--scenario", "one-hot-broker"))


def test_standalone_runs_a_scenarios_clock_on_a_new_cluster_it_does_not_keep(tmp_path):
    from pulsar_rebalance.cli.quickstart import SIMULATOR_STATE, start_cluster
    from pulsar_rebalance.errors import ConfigError
    from pulsar_rebalance.pulsar_admin import PulsarAdminClient

    state = tmp_path / "state"
    (state / "logs").mkdir(parents=True)
    sim, info = start_cluster(state, _standalone_args(state, "--scenario", "scale-up", "--clock", "600"))
    try:  # scale-up: two brokers join at simulated minute 2, 0.2 s in at 600 minutes a minute
        assert info["clock"] == 600 and len(info["brokers"]) == 8
        with PulsarAdminClient.from_url(info["admin_url"], retries=0) as admin:
            wait_for(lambda: len(admin.brokers(info["cluster"])) == 10, 30, "the clock to pass minute 2 (two joins)")
    finally:
        _stop(sim, signal.SIGTERM)
    assert not (state / SIMULATOR_STATE).exists()  # a running clock is not kept
    assert "brokers joined" in (state / "logs" / "simulator.log").read_text()
    with pytest.raises(ConfigError, match="give --scenario NAME too"):
        start_cluster(state, _standalone_args(state, "--clock", "60"))


def test_a_kept_cluster_whose_port_is_taken_fails_clearly(tmp_path):
    from pulsar_rebalance.cli.quickstart import start_cluster

    state = tmp_path / "state"
    (state / "logs").mkdir(parents=True)
    sim, info = start_cluster(state, _standalone_args(state))
    _stop(sim, signal.SIGTERM)
    host, port = info["brokers"][0].rsplit(":", 1)
    with socket.socket() as taken:
        taken.bind((host, int(port)))
        taken.listen()
        with pytest.raises(SystemExit, match="--fresh-cluster starts a new one"):
            start_cluster(state, _standalone_args(state))


# --------------------------------------------------------------------------- Airflow users and the schedule


def _in_airflow(env: dict[str, str], code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180, check=True)
    return out.stdout.strip().splitlines()[-1]


def test_user_flags_reach_simple_auth_manager_and_no_schedule_by_default(tmp_path):
    from pulsar_rebalance.cli.quickstart import airflow_users, standalone_env

    state = tmp_path / "state"
    args = _standalone_args(state, "--user", "bob:user", "--user", "carol:op")
    users = airflow_users(args.user)
    env = standalone_env(state, "postgresql://x/app", "postgresql://x/airflow", "http://127.0.0.1:1", args, users)
    env = {k: v for k, v in env.items() if not k.startswith("AIRFLOW__") or k in _STANDALONE_AIRFLOW_KEYS}
    got = _in_airflow(
        env,
        "import json\n"
        "from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager as M\n"
        "print(json.dumps([[u.username, u.role] for u in M.get_users()]))",
    )
    assert json.loads(got) == [["admin", "admin"], ["bob", "user"], ["carol", "op"]]

    # the DAG file reads the schedule from the same environment: none unless --schedule
    dag_code = (
        "import runpy\n"
        f"dag = runpy.run_path({str(Path(__file__).resolve().parents[2] / 'dags' / 'pulsar_rebalance.py')!r})['pulsar_rebalance']\n"
        "print(repr(dag.schedule), type(dag.timetable).__name__)"
    )
    assert _in_airflow(env, dag_code) == "None NullTimetable"
    hourly = standalone_env(state, "x", "y", "z", _standalone_args(state, "--schedule"), users)
    assert hourly["PULSAR_REBALANCE_SCHEDULE"] == "@hourly"
    assert _in_airflow({**env, "PULSAR_REBALANCE_SCHEDULE": "@hourly"}, dag_code) == "'@hourly' CronTriggerTimetable"


_STANDALONE_AIRFLOW_KEYS = {"AIRFLOW__CORE__AUTH_MANAGER", "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"}


@pytest.mark.parametrize(
    "flags, problem",
    [
        (["--user", "bob"], "is not NAME:ROLE"),
        (["--user", "bob:root"], "is not one of viewer, user, op, admin"),
        (["--user", "b/ob:user"], "is not NAME:ROLE"),
    ],
)
def test_user_flag_refuses_malformed_values(tmp_path, capsys, flags, problem):
    with pytest.raises(SystemExit):
        _standalone_args(tmp_path, *flags)
    assert problem in capsys.readouterr().err


def test_user_flag_refuses_duplicates_and_admin(tmp_path):
    from pulsar_rebalance.cli.quickstart import airflow_users
    from pulsar_rebalance.errors import ConfigError

    for flags in (["--user", "admin:viewer"], ["--user", "bob:user", "--user", "bob:op"]):
        with pytest.raises(ConfigError, match="must be unique"):
            airflow_users(_standalone_args(tmp_path, *flags).user)


# --------------------------------------------------------------------------- the key Airflow signs its tokens with


def test_airflow_tokens_are_signed_with_a_kept_key_long_enough_for_hs512(tmp_path, monkeypatch):
    import base64
    import stat
    import warnings

    import jwt
    from jwt.warnings import InsecureKeyLengthWarning

    from pulsar_rebalance.cli.quickstart import JWT_SECRET_ENV, standalone_env

    def warns(key: str) -> bool:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            jwt.decode(jwt.encode({"sub": "admin"}, key, algorithm="HS512"), key, algorithms=["HS512"])
        return any(issubclass(w.category, InsecureKeyLengthWarning) for w in seen)

    # Airflow's own generated default (configuration.py: 16 random bytes, base64) is flagged on every token
    assert warns(base64.b64encode(os.urandom(16)).decode())

    monkeypatch.delenv(JWT_SECRET_ENV, raising=False)
    state = tmp_path / "state"
    args = _standalone_args(state)
    env = standalone_env(state, "x", "y", "z", args, "")
    key = env[JWT_SECRET_ENV]
    assert len(key.encode()) >= 64 and not warns(key)
    kept = state / "airflow" / "jwt_secret"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert standalone_env(state, "x", "y", "z", args, "")[JWT_SECRET_ENV] == key  # every process, every restart
    assert standalone_env(tmp_path / "other", "x", "y", "z", args, "")[JWT_SECRET_ENV] != key
    # Airflow reads it from that variable (never from argv); one set by the operator wins
    got = _in_airflow(
        {k: v for k, v in env.items() if not k.startswith("AIRFLOW__") or k == JWT_SECRET_ENV},
        "from airflow.configuration import conf\nprint(conf.get('api_auth', 'jwt_secret'))",
    )
    assert got == key
    monkeypatch.setenv(JWT_SECRET_ENV, "operator's own")
    assert standalone_env(state, "x", "y", "z", args, "")[JWT_SECRET_ENV] == "operator's own"
