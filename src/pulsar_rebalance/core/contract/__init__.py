"""The JSON documents in and out of the decision core, and their validation.

* :mod:`.decide` - the ``decide`` contract: a scenario (config, cycles, state) in, decisions out.
* :mod:`.split` - the ``split`` / ``bundles`` contracts (split algorithms and bundle ranges).
* :mod:`.json_input` - typed field readers that name the offending path in every error.
* :mod:`.strict_json` - strict parsing (no NaN, no duplicate keys) and finite-only output.
* :mod:`.load_json`, :mod:`.state_json`, :mod:`.policies_json` - readers of Pulsar's load reports and bundle
  data, the strategies' state, and the placement policies (the data types parse no JSON: these do).
* :mod:`.plan_json` - readers of a plan's action rows and predictions (``plan_actions``) into
  :mod:`pulsar_rebalance.core.plan`'s types (errors there are :class:`~pulsar_rebalance.core.plan.InvalidPlanError`).

Every other error is a :class:`pulsar_rebalance.errors.ScenarioError` naming the field (``cycles[2].brokers...``).
"""
