"""Several Pulsar clusters from one Airflow: the names that tie a Connection, a DAG and a run together.

Every Airflow Connection ``pulsar_admin_<name>`` is one cluster: its DAG is ``pulsar_rebalance_<name>``
(``pulsar_admin_default`` keeps the DAG id ``pulsar_rebalance``). Airflow gives two DAGs' scheduled runs the
same run id (``scheduled__<logical date>``), while the state DB keys runs by run id alone; so a named
cluster's runs are recorded as ``<Airflow run id>@<name>`` (the default cluster's as the Airflow run id,
as before). Pure functions only: the DAG factory, the plan pages and the CLI share them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

DEFAULT_NAME = "default"
DAG_ID_PREFIX = "pulsar_rebalance"
CONN_ID_PREFIX = "pulsar_admin_"
CLUSTERS_ENV = "PULSAR_REBALANCE_CLUSTERS"
"""An explicit, comma-separated list of cluster names (for Connections that live in a secrets backend)."""
_ENV_CONN_PREFIX = "AIRFLOW_CONN_" + CONN_ID_PREFIX.upper()
NAME_PATTERN = r"^[a-z0-9][a-z0-9_]{0,63}$"
_NAME = re.compile(NAME_PATTERN)
RUN_KEY_SEPARATOR = "@"


def check_name(name: str, *, source: str) -> str:
    """``name`` if it can name a cluster (lower-case letters, digits, ``_``; at most 64), else ValueError."""
    if not _NAME.match(name):
        raise ValueError(
            f"{source}: cluster name {name!r} is not valid: use lower-case letters, digits and '_' "
            f"(it names Connection {CONN_ID_PREFIX}<name> and DAG {DAG_ID_PREFIX}_<name>)"
        )
    return name


def conn_id(name: str) -> str:
    """The admin Connection of cluster ``name``: ``pulsar_admin_<name>``."""
    return CONN_ID_PREFIX + name


def dag_id(name: str) -> str:
    """The DAG of cluster ``name``: ``pulsar_rebalance`` for the default cluster, else ``pulsar_rebalance_<name>``."""
    return DAG_ID_PREFIX if name == DEFAULT_NAME else f"{DAG_ID_PREFIX}_{name}"


def name_of_dag(dag: str) -> str | None:
    """The cluster name of DAG id ``dag`` (the inverse of :func:`dag_id`), None for another DAG."""
    if dag == DAG_ID_PREFIX:
        return DEFAULT_NAME
    prefix = DAG_ID_PREFIX + "_"
    if dag.startswith(prefix) and _NAME.match(dag[len(prefix) :]) and dag[len(prefix) :] != DEFAULT_NAME:
        return dag[len(prefix) :]
    return None


def run_key(airflow_run_id: str, name: str) -> str:
    """The state DB's run id of Airflow run ``airflow_run_id`` of cluster ``name``'s DAG."""
    return airflow_run_id if name == DEFAULT_NAME else f"{airflow_run_id}{RUN_KEY_SEPARATOR}{name}"


def run_key_template(name: str) -> str:
    """:func:`run_key` as a Jinja template of the task's ``run_id``."""
    return run_key("{{ run_id }}", name)


def airflow_run(key: str, known: Iterable[str] = ()) -> tuple[str, str]:
    """``(dag id, Airflow run id)`` of the state DB's run id ``key`` (inverse of :func:`run_key`).

    A suffix ``@<name>`` is a cluster's only if ``name`` is valid and, when ``known`` names are given,
    one of them; anything else is a run of the default DAG.
    """
    head, sep, tail = key.rpartition(RUN_KEY_SEPARATOR)
    names = set(known)
    if sep and head and _NAME.match(tail) and tail != DEFAULT_NAME and (not names or tail in names):
        return dag_id(tail), head
    return dag_id(DEFAULT_NAME), key


def cluster_names(environ: Mapping[str, str]) -> list[str]:
    """The clusters to build a DAG for, from the environment only (cheap: DAG files are parsed often).

    ``PULSAR_REBALANCE_CLUSTERS`` (``east,west``; ``default`` keeps the ``pulsar_rebalance`` DAG), when set,
    is the whole list: use it for Connections kept in Airflow's metadata DB or a secrets backend, which
    the DAG processor cannot list. Otherwise: ``default`` and every ``AIRFLOW_CONN_PULSAR_ADMIN_<NAME>``
    environment variable. Sorted, ``default`` first; a bad name is a ValueError naming it.
    """
    explicit = environ.get(CLUSTERS_ENV, "").strip()
    if explicit:
        names = {check_name(n.strip(), source=CLUSTERS_ENV) for n in explicit.split(",") if n.strip()}
    else:
        names = {DEFAULT_NAME}
        for key in environ:
            if key.upper().startswith(_ENV_CONN_PREFIX) and len(key) > len(_ENV_CONN_PREFIX):
                names.add(check_name(key[len(_ENV_CONN_PREFIX) :].lower(), source=f"environment variable {key}"))
    return sorted(names, key=lambda n: (n != DEFAULT_NAME, n))


__all__ = [
    "CLUSTERS_ENV",
    "DEFAULT_NAME",
    "NAME_PATTERN",
    "airflow_run",
    "check_name",
    "cluster_names",
    "conn_id",
    "dag_id",
    "name_of_dag",
    "run_key",
    "run_key_template",
]
