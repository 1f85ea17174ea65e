"""The JSON documents in and out of the decision core, and their validation.

* :mod:`.decide` - the ``decide`` contract: a scenario (config, cycles, state) in, decisions out.
* :mod:`.split` - the ``split`` / ``bundles`` contracts (split algorithms and bundle ranges).
* :mod:`.json_input` - typed field readers that name the offending path in every error.
* :mod:`.strict_json` - strict parsing (no NaN, no duplicate keys) and finite-only output.

Every error is a :class:`pulsar_rebalance.errors.ScenarioError` naming the field (``cycles[2].brokers...``).
"""
