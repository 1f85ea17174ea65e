"""A simulated Pulsar cluster, in two parts that import nothing of each other's.

The HTTP side, which speaks Pulsar's admin REST API (one HTTP server per broker):

* :func:`pulsar_rebalance.simulator.generator.generate_cluster` — a deterministic cluster whose first
  rebalance has real work.
* :class:`pulsar_rebalance.simulator.cluster.ClusterState` — the thread-safe state with Pulsar's
  bundle/split/unload semantics.
* :class:`pulsar_rebalance.simulator.server.SimulatedPulsar` — the HTTP servers, with fault injection
  for tests.

The closed-loop model the balance benchmarks drive (``dynamics``, ``load_models``, ``scenarios``,
``closed_loop``, the held-out and random load models): a clock, traffic that moves, brokers that come
and go. This package imports neither side, so a benchmark that imports the closed loop does not run
the HTTP side's code, and the benchmarks' record of the sources a run depends on
(``benchmarks/bench_balance.py``, ``imported_sources``) leaves the HTTP side out.
"""
