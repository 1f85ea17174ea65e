"""Alembic revision scripts (Alembic ignores this file)."""
