"""The HTTP simulator with its clock running: a closed-loop scenario served as it evolves.

:class:`~pulsar_rebalance.simulator.server.SimulatedPulsar` serves a
:class:`~pulsar_rebalance.simulator.cluster.ClusterState`, and
:meth:`ClusterState.from_model <pulsar_rebalance.simulator.cluster.ClusterState.from_model>` builds one from the
closed-loop :class:`~pulsar_rebalance.simulator.dynamics.ClusterModel` at its current instant. A
:class:`LiveCluster` keeps the two in step as simulated time passes, so the HTTP server is a view of the one
closed-loop model. Each :meth:`LiveCluster.advance`, under the state's lock:

1. what clients did over HTTP goes into the model: bundle boundaries (splits) and ownership (unloads, placed
   by the HTTP side as Pulsar's lookup places them, ``destinationBroker`` honoured);
2. the model's clock moves on (:meth:`ClusterModel.advance`): topic drift, the daily cycle, on/off
   consumers, bursts, brokers joining, leaving, failing and restarting (the model's lookup places a
   leaving broker's bundles);
3. the HTTP side follows: membership (a broker the model lost stops listening and leaves the active list,
   :meth:`SimulatedPulsar.kill_broker`; one that joined listens on a new port; a restarted one comes back
   on its old address), then ownership and every topic's rates.

With no HTTP change in between, the brokers' load reports are then the closed loop's noise-free ones at the
same minute, number for number (``tests/simulator/test_live.py``). What is not carried over: the closed
loop's rate noise (the HTTP side reports rates as they are; its CPU noise is the state's own stream) and
placement constraints (:meth:`ClusterState.from_model` refuses a model with them).

:meth:`LiveCluster.start` runs the clock in a thread at ``speed`` simulated minutes per wall-clock minute
(``pulsar-rebalance simulator --scenario NAME --clock SPEED``), one simulated minute per step whatever the
wall clock does (so a run is the same at any speed: the closed loop's minute cadence without decisions); tests
call :meth:`LiveCluster.advance`.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from pulsar_rebalance.core.pulsar.bundles import NamespaceBundles
from pulsar_rebalance.simulator.cluster import BrokerSpec, ClusterState, spec_of_machine
from pulsar_rebalance.simulator.dynamics import DAY_MS, ClusterModel
from pulsar_rebalance.simulator.server import SimulatedPulsar

logger = logging.getLogger(__name__)

MAX_TICK_S = 0.5
"""The clock thread looks at the wall clock at least this often."""


@dataclass(frozen=True, slots=True)
class Tick:
    """What one :meth:`LiveCluster.advance` did."""

    minute: int
    """The model's cycle (simulated minutes since the scenario's start) after the step."""
    joined: tuple[str, ...] = ()
    """HTTP ids of brokers that joined or came back."""
    left: tuple[str, ...] = ()
    """HTTP ids of brokers that stopped (left, failed or restarting)."""
    moved: int = 0
    """Bundles the model placed again (a broker leaving)."""


def move_to_today(model: ClusterModel, wall_ms: int | None = None) -> None:
    """Move ``model``'s clock forward by whole days (the daily cycle keeps its phase) to the first such instant at or
    after the wall clock (``wall_ms``, default now): what the product records at wall-clock time is then never
    ahead of a planner clocked on the model's minute (``stage_detect(now_ms=model.now_ms)``)."""
    wall = int(time.time() * 1000) if wall_ms is None else wall_ms
    model.now_ms += -(-(wall - model.now_ms) // DAY_MS) * DAY_MS


class LiveCluster:
    """Keep ``sim``'s state a view of ``model`` as the model's clock runs (module docstring).

    ``sim`` must be started and serve ``ClusterState.from_model(model, ...)`` (its brokers' machine keys are
    the model's broker ids). Raises ``ValueError`` when a served broker is not one of the model's.
    """

    def __init__(self, sim: SimulatedPulsar, model: ClusterModel) -> None:
        self.sim = sim
        self.model = model
        state = sim.state
        self._http: dict[str, str] = {}  # model broker id -> HTTP broker id
        for http_id in state.broker_ids():
            key = state.machine_key(http_id)
            if key not in model.brokers:
                raise ValueError(f"served broker {http_id} (machine {key!r}) is not a broker of the model")
            self._http[key] = http_id
        self._gone: dict[str, tuple[str, BrokerSpec]] = {}  # model id -> (HTTP id, spec) of a stopped broker
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def minute(self) -> int:
        """Simulated minutes since the scenario's start."""
        return self.model.cycle

    # ------------------------------------------------------------------ one step
    def advance(self, minutes: int = 1) -> Tick:
        """Move the clock ``minutes`` simulated minutes (module docstring: HTTP changes in, model step, view out)."""
        if minutes < 1:
            raise ValueError(f"minutes must be >= 1, got {minutes}")
        state = self.sim.state
        with self._lock, state.lock:
            self._push(state)
            before = dict(self.model.owners)
            self.model.advance(minutes)
            joined, left = self._membership(state)
            self._pull(state)
            moved = sum(1 for b, o in self.model.owners.items() if before.get(b) != o)
        tick = Tick(self.model.cycle, tuple(joined), tuple(left), moved)
        if joined or left:
            logger.info(
                "simulated minute %d: brokers joined %s, stopped %s; %d bundle(s) placed again",
                tick.minute,
                list(joined),
                list(left),
                moved,
            )
        return tick

    def _push(self, state: ClusterState) -> None:
        """The HTTP side's boundaries and ownership into the model."""
        model_id = {h: m for m, h in self._http.items()}
        for ns, bounds in state.boundaries().items():
            if tuple(bounds) != self.model.namespaces[ns].boundaries:
                self.model.namespaces[ns] = NamespaceBundles(bounds)
        self.model.owners = {bundle: model_id[o] for bundle, o in state.owners().items()}

    def _membership(self, state: ClusterState) -> tuple[list[str], list[str]]:
        live = set(self.model.live_brokers())
        joined: list[str] = []
        left: list[str] = []
        for key in [k for k in self._http if k not in live]:
            http_id = self._http.pop(key)
            self._gone[key] = (http_id, state.broker_spec(http_id))
            self.sim.kill_broker(http_id)  # its bundles: the model's placement, taken below
            left.append(http_id)
        for key in [k for k in self.model.live_brokers() if k not in self._http]:
            machine = self.model.brokers[key]
            if key in self._gone:  # a restart: back on its old address, as the same machine
                http_id, spec = self._gone.pop(key)
                state.add_broker(spec, machine_key=key, machine=machine)
                self.sim.restart_broker(http_id)
            else:
                spec = spec_of_machine("joining", machine, self.model.load_model)
                http_id = self.sim.add_broker(spec, machine_key=key, machine=machine)
            self._http[key] = http_id
            joined.append(http_id)
        return joined, left

    def _pull(self, state: ClusterState) -> None:
        """The model's ownership and topic rates into the HTTP side."""
        owners = {bundle: self._http[o] for bundle, o in self.model.owners.items()}
        rates = {
            t.name: (t.rate_in, t.rate_out, t.rate_in * t.msg_size, t.rate_out * t.msg_size) for t in self.model.topics
        }
        state.follow(owners, rates)

    # ------------------------------------------------------------------ the clock thread
    def start(self, speed: float) -> LiveCluster:
        """Run the clock in a daemon thread: ``speed`` simulated minutes per wall-clock minute (> 0)."""
        if not speed > 0:
            raise ValueError(f"the clock's speed must be > 0 simulated minutes per minute, got {speed}")
        if self._thread is not None:
            raise RuntimeError("the clock is already running")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, args=(speed,), name="sim-clock", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the clock thread (the cluster stays where it is)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self, speed: float) -> None:
        started = time.monotonic()
        done = 0
        tick_s = min(MAX_TICK_S, 30.0 / speed)
        while not self._stop.wait(tick_s):
            due = int((time.monotonic() - started) * speed / 60.0) - done
            if due <= 0:
                continue
            try:
                for _ in range(due):  # minute by minute, whatever the wall clock did: the same run at any speed
                    if self._stop.is_set():
                        return
                    self.advance(1)
                    done += 1
            except Exception:  # keep serving what there is; the log says why the clock stopped
                logger.exception("the simulated clock stopped at minute %d", self.minute)
                return


__all__ = ["LiveCluster", "Tick", "move_to_today"]
