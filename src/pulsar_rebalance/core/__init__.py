"""See the package docstring in pulsar_rebalance/__init__.py."""
