"""Imbalance watch (optional): start a rebalance run when the worst broker stays over a threshold.

Each run of this DAG is one sample: ``sample_imbalance`` reads every broker's load report through
Pulsar's admin API and records the worst broker's usage; after ``samples`` consecutive samples at or
over ``threshold``, inside the cluster's maintenance window (or any time if it has none), and with no
other run of the cluster planning, waiting or executing, ``trigger_rebalance`` starts one
rebalance run (run id ``imbalance__<this run's id>``). One run per episode: the watch re-arms
only after a sample with the worst broker back below the threshold. The triggered plan goes through the
same gate and maintenance-window wait as any other. Paused when created: unpause it to turn it on.

One watch per cluster, like the rebalance DAGs: ``pulsar_rebalance_imbalance_watch`` watches the default
cluster (``pulsar_rebalance``), ``pulsar_rebalance_imbalance_watch_<name>`` cluster ``<name>`` (its
Connection ``pulsar_admin_<name>``, its DAG ``pulsar_rebalance_<name>``). Logic lives in
``pulsar_rebalance.orchestration.imbalance``; this file only wires tasks. (Airflow's DAG processor, in
safe mode, reads only files that mention both "airflow" and "dag": this docstring does.)
"""

from __future__ import annotations

import os

from pulsar_rebalance.orchestration.imbalance import build_watch_dags

globals().update(build_watch_dags(os.environ, doc_md=__doc__))
