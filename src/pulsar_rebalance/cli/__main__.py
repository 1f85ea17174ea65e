"""``python -m pulsar_rebalance.cli``: same as the ``pulsar-rebalance`` console script."""

from pulsar_rebalance.cli import main

raise SystemExit(main())
