"""Registers the plan pages with Airflow (wiring only; the app is ``pulsar_rebalance.orchestration.ui``).

* ``/pulsar-rebalance/`` (plans) and ``/pulsar-rebalance/plans/{plan_id}`` on the api-server, every route
  behind Airflow's authentication and read access to the ``pulsar_rebalance`` DAG;
* a **Browse → Rebalance plans** entry in the Airflow UI's navigation, showing those pages in the UI.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from pulsar_rebalance.orchestration.ui.app import URL_PREFIX, create_app


class PulsarRebalancePlugin(AirflowPlugin):
    name = "pulsar_rebalance"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "pulsar-rebalance plans"}]
    external_views = [
        {
            "name": "Rebalance plans",
            "href": URL_PREFIX.lstrip("/") + "/",
            "url_route": "pulsar-rebalance",
            "destination": "nav",
            "category": "browse",
        }
    ]
