"""Sub-commands ``decide``, ``split`` and ``bundles``: the decision core's JSON contracts on the command line.

Each reads one JSON document (a file path, or ``-`` for stdin), runs the pure contract function and
prints the result as JSON on stdout with exit code 0. Invalid input - unreadable file, invalid JSON
(reported with file, line and column), or a document the contract rejects - gives exit code 2, a
one-line message on stderr naming the file or the offending field, and **nothing on stdout**: the
output JSON is fully computed and serialised before anything is printed.

Nothing heavy is imported at module import time (``decide``'s engine is imported inside its handler).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from pulsar_rebalance.core.contract.strict_json import dumps_finite, loads_strict
from pulsar_rebalance.errors import ScenarioError

ContractFn = Callable[[dict[str, Any]], dict[str, Any]]


def read_json_document(source: str) -> Any:
    """Read and parse ``source`` (a path or ``-`` for stdin); errors are ``ScenarioError`` naming the file."""
    label = "<stdin>" if source == "-" else source
    try:
        if source == "-":
            buffer = getattr(sys.stdin, "buffer", None)  # bytes, decoded strictly (not with the locale's errors=)
            text = buffer.read().decode("utf-8") if buffer is not None else sys.stdin.read()
        else:
            with open(source, encoding="utf-8") as fh:
                text = fh.read()
    except OSError as exc:
        raise ScenarioError(label, f"cannot read scenario: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(label, f"scenario is not UTF-8 text: {exc.reason}") from None
    return loads_strict(text, label)


def _run(args: argparse.Namespace, contract: ContractFn) -> int:
    doc = read_json_document(args.scenario)
    if not isinstance(doc, dict):
        label = "<stdin>" if args.scenario == "-" else args.scenario
        raise ScenarioError(label, f"the scenario must be a JSON object, got {type(doc).__name__}")
    result = contract(doc)
    text = dumps_finite(result, indent=None if args.compact else 2)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
    return 0


def _decide(args: argparse.Namespace) -> int:
    from pulsar_rebalance.core.contract.decide import decide_scenario

    return _run(args, decide_scenario)


def _split(args: argparse.Namespace) -> int:
    from pulsar_rebalance.core.contract.split import split_scenario

    return _run(args, split_scenario)


def _bundles(args: argparse.Namespace) -> int:
    from pulsar_rebalance.core.contract.split import bundles_scenario

    return _run(args, bundles_scenario)


def _add(sub: Any, name: str, help_text: str, description: str, func: Callable[[argparse.Namespace], int]) -> None:
    parser = sub.add_parser(name, help=help_text, description=description)
    parser.add_argument("scenario", metavar="SCENARIO", help="path of a JSON scenario file, or - for stdin")
    parser.add_argument("--compact", action="store_true", help="print the JSON result on one line")
    parser.set_defaults(func=func)


def register(subparsers: Any) -> None:
    """Add ``decide``, ``split`` and ``bundles`` to the ``pulsar-rebalance`` dispatcher."""
    _add(
        subparsers,
        "decide",
        "run Pulsar's shedding/placement/split decisions on a scenario (JSON in, JSON out)",
        "Run the configured Pulsar shedding strategy, placement and split triggers over a load "
        "snapshot, exactly as Pulsar would, and print the decisions as JSON.",
        _decide,
    )
    _add(
        subparsers,
        "split",
        "compute a bundle split with one of Pulsar's split algorithms (JSON in, JSON out)",
        "Compute split boundaries and child bundles for one bundle with range_equally_divide, "
        "topic_count_equally_divide, specified_positions_divide or flow_or_qps_equally_divide.",
        _split,
    )
    _add(
        subparsers,
        "bundles",
        "map topics to a namespace's bundles (crc32, as Pulsar) (JSON in, JSON out)",
        "Given a namespace's boundaries (or its number of bundles), print which bundle each topic belongs to.",
        _bundles,
    )
