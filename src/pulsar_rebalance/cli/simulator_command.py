"""``pulsar-rebalance simulator``: run a simulated Pulsar cluster in the foreground.

Prints ONE JSON line on stdout when every broker listens — ``{"admin_url": ..., "brokers": [...],
"cluster": ...}`` — (and writes the same JSON to ``--ready-file``), then serves until SIGTERM/SIGINT.
The token (optional) is read from the environment variable named by ``--token-env``, never from argv.
OAuth2 instead of a token: ``--oauth2-client-id ID --oauth2-secret-env VAR`` serves an issuer at
``<admin_url>/oauth2`` (its URL is ``issuer_url`` in the ready JSON) whose tokens live
``--oauth2-token-lifetime`` seconds, and the admin API accepts only those; the secret is read from $VAR.
Faults for demos/tests: ``--fault`` (repeatable) or env ``PULSAR_REBALANCE_SIM_FAULTS``, e.g.
``1:error=500,*:latency=0.2`` (see ``SimulatedPulsar.apply_fault_spec``).
``--scenario NAME`` serves a balance-benchmark scenario at its first cycle; ``--clock SPEED`` also runs its
clock (``simulator.live``): traffic and membership move on, ``clock`` in the ready JSON, and each broker joining
or stopping is a line on stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from pulsar_rebalance.errors import ConfigError, RebalanceError

MAX_BROKERS = 2000
MAX_CLOCK = 1440.0
"""--clock: at most a simulated day per minute (the clock steps minute by minute)."""
"""Each simulated broker is an HTTP server with its own thread and socket: a bound keeps a typo
(``--brokers 100000``) from exhausting the machine. Larger clusters are for the in-process model
(``pulsar_rebalance.simulator`` without HTTP) and the synthetic snapshot generator."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "simulator",
        help="run a simulated Pulsar cluster (admin REST API, one HTTP server per broker)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--brokers", type=int, default=None, help="number of brokers (default 5)")
    parser.add_argument("--seed", type=int, default=None, help="generator seed (default 42)")
    parser.add_argument("--host", default="127.0.0.1", help="interface/host of every broker (default 127.0.0.1)")
    parser.add_argument(
        "--port-base",
        type=int,
        default=18080,
        help="broker i listens on PORT_BASE+i (default 18080); 0 = OS-chosen ephemeral ports for a new "
        "cluster, and the saved addresses of a --state-file's cluster (its brokers keep their ids)",
    )
    parser.add_argument(
        "--state-file",
        type=Path,
        default=None,
        help="persist the cluster state here after every mutation; if it exists, start from it",
    )
    parser.add_argument("--token-env", default=None, metavar="VAR", help="require 'Bearer <$VAR>' on every request")
    parser.add_argument(
        "--oauth2-client-id", default=None, metavar="ID", help="serve an OAuth2 issuer for this client id"
    )
    parser.add_argument(
        "--oauth2-secret-env", default=None, metavar="VAR", help="the OAuth2 client secret is in $VAR (not argv)"
    )
    parser.add_argument(
        "--oauth2-token-lifetime", type=int, default=60, metavar="S", help="OAuth2 token lifetime in s (default 60)"
    )
    parser.add_argument("--oauth2-audience", default=None, help="audience a token request must name (optional)")
    parser.add_argument(
        "--scenario",
        default=None,
        metavar="NAME",
        help="serve a closed-loop benchmark scenario at its first cycle instead of the generated cluster "
        "(steady-with-noise, one-hot-broker, heterogeneous, ... ; its own brokers: no --brokers), for --seed "
        "(default 1) under --load-model: the brokers report what the balance benchmark's do",
    )
    parser.add_argument(
        "--clock",
        type=float,
        default=None,
        metavar="SPEED",
        help="with --scenario: run the scenario's clock at SPEED simulated minutes per wall-clock minute (60: a "
        "simulated hour a minute), so traffic, on/off consumers and brokers joining, failing or restarting "
        "move on while it serves, and what clients split or unload moves the scenario's model (default: the "
        "scenario stays at its first cycle)",
    )
    parser.add_argument(
        "--load-model",
        default=None,
        metavar="NAME",
        help="how traffic turns into the usage brokers report: linear (default), in-out-fanout, convex-cpu, "
        "nic-bound, heterogeneous-capacity, the held-out memory-bound, per-topic-cost, tls-crypto, "
        "bookie-backpressure, catch-up-reads, gc-pressure, or random-<k> (the benchmarks' models; a --state-file "
        "keeps its own)",
    )
    parser.add_argument(
        "--cpu-noise",
        type=float,
        default=None,
        metavar="F",
        help="noise on the reported CPU: each report's CPU usage times 1 + N(0, F), F from 0 to 1 (default 0; "
        "with --scenario the scenario's own, 2-3 %%)",
    )
    parser.add_argument(
        "--rate-noise",
        type=float,
        default=None,
        metavar="F",
        help="noise on the reported rates: each bundle's and topic's reported msg/s and bytes/s times 1 + N(0, F), "
        "F from 0 to 1 (default 0; the balance benchmark's closed loop uses 0.03)",
    )
    parser.add_argument("--ready-file", type=Path, default=None, help="also write the ready JSON to this file")
    parser.add_argument("--fault", action="append", default=[], metavar="SPEC", help="inject a fault, e.g. 1:error=500")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pulsar_rebalance.simulator.cluster import ClusterState
    from pulsar_rebalance.simulator.dynamics import ClusterModel
    from pulsar_rebalance.simulator.generator import generate_cluster, scenario_model_and_cluster
    from pulsar_rebalance.simulator.live import LiveCluster
    from pulsar_rebalance.simulator.server import FAULTS_ENV_VAR, OAuth2Issuer, SimulatedPulsar

    token = None
    if args.token_env:
        token = os.environ.get(args.token_env)
        if not token:
            raise ConfigError(f"environment variable {args.token_env} (--token-env) is unset or empty", key="token-env")
    oauth2 = None
    if args.oauth2_client_id or args.oauth2_secret_env:
        if not (args.oauth2_client_id and args.oauth2_secret_env):
            raise ConfigError("--oauth2-client-id and --oauth2-secret-env go together", key="oauth2-client-id")
        if token:
            raise ConfigError("--token-env and --oauth2-client-id exclude each other: give one", key="token-env")
        secret = os.environ.get(args.oauth2_secret_env)
        if not secret:
            raise ConfigError(
                f"environment variable {args.oauth2_secret_env} (--oauth2-secret-env) is unset or empty",
                key="oauth2-secret-env",
            )
        try:
            oauth2 = OAuth2Issuer(
                args.oauth2_client_id,
                secret,
                token_lifetime_s=args.oauth2_token_lifetime,
                audience=args.oauth2_audience,
            )
        except ValueError as exc:
            raise ConfigError(f"--oauth2-token-lifetime: {exc}", key="oauth2-token-lifetime") from None
    if args.port_base != 0 and not 0 < args.port_base <= 65535:
        raise ConfigError(f"--port-base must be 0 or a TCP port, got {args.port_base}", key="port-base")
    if args.brokers is not None and not 1 <= args.brokers <= MAX_BROKERS:
        raise ConfigError(
            f"--brokers must be from 1 to {MAX_BROKERS} (one HTTP server and thread per broker), got {args.brokers}",
            key="brokers",
        )
    if args.port_base and args.port_base + (args.brokers or 5) - 1 > 65535:
        raise ConfigError(
            f"--port-base {args.port_base} + {args.brokers or 5} brokers runs past TCP port 65535", key="port-base"
        )

    if args.clock is not None:
        if args.scenario is None:
            raise ConfigError("--clock runs a scenario's clock: give --scenario NAME too", key="clock")
        if not 0 < args.clock <= MAX_CLOCK:
            raise ConfigError(
                f"--clock must be above 0 and at most {MAX_CLOCK:g} simulated minutes per minute, got {args.clock}",
                key="clock",
            )
        if args.state_file is not None:
            raise ConfigError(
                "--clock and --state-file exclude each other (a saved cluster has no clock to resume)", key="clock"
            )
    model: ClusterModel | None = None
    state_file: Path | None = args.state_file
    if state_file is not None and state_file.exists():
        try:
            state = ClusterState.load(state_file)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot load --state-file {state_file}: {exc}", key="state-file") from exc
        if args.load_model is not None and args.load_model != state.load_model_name:
            raise ConfigError(
                f"--load-model {args.load_model} contradicts --state-file {state_file} (load model "
                f"{state.load_model_name})",
                key="load-model",
            )
        given = [f for f in ("scenario", "cpu_noise", "rate_noise") if getattr(args, f) is not None]
        if given:
            flag = given[0].replace("_", "-")
            raise ConfigError(
                f"--{flag} and an existing --state-file {state_file} exclude each other (the file has its cluster "
                "and noise)",
                key=flag,
            )
        if args.brokers is not None and args.brokers != len(state.broker_ids()):
            raise ConfigError(
                f"--brokers {args.brokers} contradicts --state-file {state_file} ({len(state.broker_ids())} brokers)",
                key="brokers",
            )
        if args.port_base:
            mapping = {b: f"{args.host}:{args.port_base + i}" for i, b in enumerate(state.broker_ids())}
            state.rename_brokers(mapping)
        else:  # the saved addresses, on this --host: the brokers keep their ports, so their ids stay the same
            mapping = {b: f"{args.host}:{b.rsplit(':', 1)[1]}" for b in state.broker_ids()}
            if any(old != new for old, new in mapping.items()):
                state.rename_brokers(mapping)
        ephemeral = False
    else:
        if args.scenario is not None and args.brokers is not None:
            raise ConfigError("--scenario brings its own brokers: drop --brokers", key="brokers")
        try:
            if args.scenario is not None:
                model, state = scenario_model_and_cluster(
                    args.scenario,
                    seed=1 if args.seed is None else args.seed,
                    load_model=args.load_model,
                    host=args.host,
                    port_base=args.port_base,
                    cpu_noise=args.cpu_noise,
                    rate_noise=0.0 if args.rate_noise is None else args.rate_noise,
                )
            else:
                state = generate_cluster(
                    seed=42 if args.seed is None else args.seed,
                    brokers=5 if args.brokers is None else args.brokers,
                    host=args.host,
                    port_base=args.port_base,
                    load_model=args.load_model,
                    cpu_noise=0.0 if args.cpu_noise is None else args.cpu_noise,
                    rate_noise=0.0 if args.rate_noise is None else args.rate_noise,
                )
        except ConfigError as exc:
            if exc.key in ("load_model", "scenario", "cpu_noise", "rate_noise"):
                flag = exc.key.replace("_", "-")
                raise ConfigError(f"--{flag}: {exc}", key=flag) from None
            raise
        if state_file is not None:
            state.state_file = state_file
            try:
                state.save()
            except OSError as exc:  # an environment problem (exit 1), not a bug
                raise RebalanceError(f"cannot write --state-file {state_file}: {exc.strerror or exc}") from None
        ephemeral = args.port_base == 0

    sim = SimulatedPulsar(state, host=args.host, ephemeral=ephemeral, token=token, oauth2=oauth2)
    live: LiveCluster | None = None
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            sim.start()
        except OSError as exc:
            print(f"pulsar-rebalance simulator: error: {exc}", file=sys.stderr)
            return 1
        if args.clock is not None and model is not None:
            _log_the_clock()
            live = LiveCluster(sim, model).start(args.clock)
        try:
            for spec in [os.environ.get(FAULTS_ENV_VAR, ""), *args.fault]:
                if spec:
                    sim.apply_fault_spec(spec)
        except ValueError as exc:
            raise ConfigError(f"invalid fault spec: {exc}", key="fault") from exc
        info: dict[str, Any] = {
            "admin_url": sim.admin_url,
            "brokers": sim.broker_ids,
            "cluster": state.cluster,
            "load_model": state.load_model_name,
        }
        if oauth2 is not None:
            info["issuer_url"] = sim.issuer_url
        if live is not None:
            info["clock"] = args.clock
        ready = json.dumps(info)
        if args.ready_file is not None:
            tmp = args.ready_file.with_name(args.ready_file.name + ".tmp")
            tmp.write_text(ready + "\n", encoding="utf-8")
            os.replace(tmp, args.ready_file)
        print(ready, flush=True)
        while not stop.wait(0.5):
            pass
        return 0
    finally:
        if live is not None:
            live.stop()
        sim.stop()
        if state.state_file is not None:  # saved after every change already; once more, as it stopped
            state.save()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _log_the_clock() -> None:
    """What the running clock does (brokers joining, stopping) goes to stderr, one line each."""
    clock_log = logging.getLogger("pulsar_rebalance.simulator.live")
    if not clock_log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("pulsar-rebalance simulator: %(message)s"))
        clock_log.addHandler(handler)
        clock_log.setLevel(logging.INFO)
