"""Several clusters: which DAGs the environment names, and how a run id maps back to its DAG and run."""

from __future__ import annotations

import pytest

from pulsar_rebalance.core import clusters


def test_without_a_list_every_admin_connection_variable_names_a_cluster_and_default_stays():
    env = {
        "AIRFLOW_CONN_PULSAR_ADMIN_WEST": "{}",
        "AIRFLOW_CONN_PULSAR_ADMIN_EAST_2": "http://x",
        "AIRFLOW_CONN_PULSAR_REBALANCE_DB": "{}",  # not an admin connection
        "AIRFLOW_CONN_SPARK_DEFAULT": "{}",
    }
    assert clusters.cluster_names(env) == ["default", "east_2", "west"]
    assert clusters.cluster_names({}) == ["default"]
    assert [clusters.dag_id(n) for n in clusters.cluster_names(env)] == [
        "pulsar_rebalance",
        "pulsar_rebalance_east_2",
        "pulsar_rebalance_west",
    ]
    assert clusters.conn_id("west") == "pulsar_admin_west" and clusters.conn_id("default") == "pulsar_admin_default"


def test_an_explicit_list_is_the_whole_list():
    env = {"PULSAR_REBALANCE_CLUSTERS": " west, east ,,", "AIRFLOW_CONN_PULSAR_ADMIN_NORTH": "{}"}
    assert clusters.cluster_names(env) == ["east", "west"]  # no default DAG unless listed
    assert clusters.cluster_names({"PULSAR_REBALANCE_CLUSTERS": "west,default"}) == ["default", "west"]


@pytest.mark.parametrize(
    ("env", "bad"),
    [
        ({"PULSAR_REBALANCE_CLUSTERS": "east,West"}, "'West'"),
        ({"PULSAR_REBALANCE_CLUSTERS": "us-east"}, "'us-east'"),
        ({"AIRFLOW_CONN_PULSAR_ADMIN_A.B": "{}"}, "'a.b'"),
    ],
)
def test_a_bad_name_is_refused_naming_it_and_where_it_came_from(env, bad):
    with pytest.raises(ValueError, match=bad) as err:
        clusters.cluster_names(env)
    assert next(iter(env)) in str(err.value) or "PULSAR_REBALANCE_CLUSTERS" in str(err.value)


def test_run_keys_keep_two_dags_same_run_id_apart_and_map_back():
    same = "scheduled__2026-03-01T12:00:00+00:00"
    keys = {clusters.run_key(same, n) for n in ("default", "east", "west")}
    assert keys == {same, same + "@east", same + "@west"}
    for name in ("default", "east", "west"):
        assert clusters.airflow_run(clusters.run_key(same, name)) == (clusters.dag_id(name), same)
    assert clusters.run_key_template("east") == "{{ run_id }}@east"
    assert clusters.run_key_template("default") == "{{ run_id }}"
    # a suffix that is no cluster name (or not a known one) is part of a default-DAG run id
    assert clusters.airflow_run("manual__x@Not-A-Name") == ("pulsar_rebalance", "manual__x@Not-A-Name")
    assert clusters.airflow_run("manual__x@north", known=["east"]) == ("pulsar_rebalance", "manual__x@north")


def test_dag_ids_map_back_to_names():
    assert clusters.name_of_dag("pulsar_rebalance") == "default"
    assert clusters.name_of_dag("pulsar_rebalance_west") == "west"
    assert clusters.name_of_dag("pulsar_rebalance_default") is None  # default's DAG is pulsar_rebalance
    assert clusters.name_of_dag("other_dag") is None
