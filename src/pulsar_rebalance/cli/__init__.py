"""The ``pulsar-rebalance`` console script.

Each sub-command lives in its own module with a ``register(subparsers)`` function that adds
its parser and sets ``func`` (a callable taking the parsed ``argparse.Namespace`` and returning
an exit code). Modules are imported lazily-cheap: nothing heavy (airflow, pyspark) at import.

Exit codes: 0 success, 1 operational failure (database unreachable, bad database URL, admin API
down, ...), 2 invalid input / usage, 130 interrupted. Whatever happens, the user sees **one line**
on stderr, never a traceback: :func:`main` turns our own errors into their message and anything
unexpected (a bug) into ``internal error: <type>: <message>`` with exit 1. Set
``PULSAR_REBALANCE_DEBUG=1`` to get the full traceback as well (for bug reports).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
import warnings
from collections.abc import Sequence

from pulsar_rebalance.errors import RebalanceError

# module name -> sub-commands it registers (documentation only; order = help order)
_COMMAND_MODULES = (
    "pulsar_rebalance.cli.core_commands",  # decide, split, bundles
    "pulsar_rebalance.cli.plans",  # plans list|show|approve|reject, db upgrade
    "pulsar_rebalance.cli.history",  # history BUNDLE [--at T]
    "pulsar_rebalance.cli.brokers",  # brokers cordoned|cordon|uncordon
    "pulsar_rebalance.cli.windows",  # windows show|set|clear
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


DEBUG_ENV_VAR = "PULSAR_REBALANCE_DEBUG"
"""Set to 1 to print the traceback of any error (after the one-line message)."""


def main(argv: Sequence[str] | None = None) -> int:
    # platformdirs (pulled in by the embedded Postgres) warns on every start when XDG_RUNTIME_DIR is
    # unset, which is normal on servers; it is noise in a CLI's output.
    warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, arg in enumerate(argv):
        problem = _unusable_argument(arg)
        if problem:
            parser.error(f"argument {i + 1} {problem}")  # exit 2
    args = parser.parse_args(argv)  # usage errors: argparse prints usage + one error line, exit 2
    try:
        return int(args.func(args) or 0)
    except RebalanceError as exc:
        return _fail(args.command, str(exc), 2 if _is_input_error(exc) else 1)
    except KeyboardInterrupt:
        return _fail(args.command, "interrupted", 130)
    except BrokenPipeError:  # stdout closed early (``| head``): not an error worth a message
        _silence_stdout()
        return 1
    except Exception as exc:  # a bug: say so in one line; the traceback is one env var away
        return _fail(
            args.command,
            f"internal error: {type(exc).__name__}: {exc} "
            f"(set {DEBUG_ENV_VAR}=1 for the traceback, and please report it)",
            1,
        )


def _unusable_argument(arg: str) -> str | None:
    """Why ``arg`` cannot be used as text (argv bytes that are not UTF-8 arrive as lone surrogates)."""
    if "\x00" in arg:
        return "contains a NUL character"
    try:
        arg.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8 text"
    return None


def _fail(command: str, message: str, code: int) -> int:
    if os.environ.get(DEBUG_ENV_VAR, "") not in ("", "0"):
        traceback.print_exc()
    print(f"pulsar-rebalance {command}: error: {one_line(message)}", file=sys.stderr)
    return code


def one_line(message: str) -> str:
    """``message`` on one line: libpq and others put hints on extra lines; join them with ``; ``."""
    return "; ".join(part.strip() for part in message.splitlines() if part.strip())


def _silence_stdout() -> None:
    # Python flushes stdout again at exit and would print "Exception ignored ... BrokenPipeError".
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _is_input_error(exc: RebalanceError) -> bool:
    """Exit 2 for what the user typed; exit 1 for the environment (incl. a bad environment variable)."""
    from pulsar_rebalance import errors
    from pulsar_rebalance.store.repository import InvalidRowError

    if isinstance(exc, errors.ConfigError) and exc.key is not None and exc.key.isupper():
        return False  # ConfigError(key="PULSAR_ADMIN_URL"): the environment is misconfigured
    return isinstance(exc, (errors.ScenarioError, errors.ConfigError, errors.PlanError, InvalidRowError))
