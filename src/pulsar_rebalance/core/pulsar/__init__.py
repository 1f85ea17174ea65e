"""Pulsar's own load balancing, reproduced: what a Pulsar broker would decide, with Pulsar's names and arithmetic.

* :mod:`.load` - the load reports and bundle data (``LocalBrokerData``, ``NamespaceBundleStats``,
  ``BundleData``, ``TimeAverageBrokerData``, ``BrokerLoadData``), Pulsar's float32 usage arithmetic.
* :mod:`.bundles` - bundle ranges, naming and topic hashing (``NamespaceBundles``, ``split_range``).
* :mod:`.split_algorithms`, :mod:`.split_trigger` - the four split algorithms and Pulsar's split conditions.
* :mod:`.shedders` - one module per Pulsar shedding strategy; :mod:`.placement` - one per placement strategy.
* :mod:`.policies` - namespace isolation policies, anti-affinity groups and failure domains.
* :mod:`.config` - ``broker.conf``'s load-balancer keys and defaults; :mod:`.state` - what the leader
  broker keeps between cycles.

Where this package deviates from Pulsar it says so at the place. The product's own decisions live
beside it: :mod:`pulsar_rebalance.core.planner` (the GlobalPlanner), and in :mod:`pulsar_rebalance.core`
the do-no-harm guard, plans, cycles and modes; :mod:`pulsar_rebalance.core.contract` reads and writes
the JSON documents.
"""
