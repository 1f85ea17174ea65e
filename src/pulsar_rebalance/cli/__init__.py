"""The ``pulsar-rebalance`` console script.

Each sub-command lives in its own module with a ``register(subparsers)`` function that adds
its parser and sets ``func`` (a callable taking the parsed ``argparse.Namespace`` and returning
an exit code). Modules are imported lazily-cheap: nothing heavy (airflow, pyspark) at import.

Exit codes: 0 success, 1 operational failure, 2 invalid input / usage.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from collections.abc import Sequence

from pulsar_rebalance.errors import RebalanceError

# module name -> sub-commands it registers (documentation only; order = help order)
_COMMAND_MODULES = (
    "pulsar_rebalance.cli.core_commands",  # decide, split, bundles
    "pulsar_rebalance.cli.plans",  # plans list|show|approve|reject, db upgrade
    "pulsar_rebalance.cli.history",  # history BUNDLE [--at T]
    "pulsar_rebalance.cli.simulator_command",  # simulator
    "pulsar_rebalance.cli.quickstart",  # db, demo (the README's main job)
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pulsar-rebalance",
        description="Approval-gated load rebalancer for Apache Pulsar brokers.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a module still being written must not break the others
            if exc.name == name:
                continue
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # platformdirs (pulled in by the embedded Postgres) warns on every start when XDG_RUNTIME_DIR is
    # unset, which is normal on servers; it is noise in a CLI's output.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except RebalanceError as exc:
        print(f"pulsar-rebalance {args.command}: error: {exc}", file=sys.stderr)
        return 2 if _is_input_error(exc) else 1


def _is_input_error(exc: RebalanceError) -> bool:
    from pulsar_rebalance import errors

    return isinstance(exc, (errors.ScenarioError, errors.ConfigError, errors.PlanError))

