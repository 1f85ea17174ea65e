"""Pulsar admin REST client (httpx). See :mod:`pulsar_rebalance.pulsar_admin.client`."""

from __future__ import annotations

from pulsar_rebalance.pulsar_admin.client import MAX_REDIRECTS, PulsarAdminClient

__all__ = ["MAX_REDIRECTS", "PulsarAdminClient"]
