"""The order the suite runs in on several pytest-xdist workers (``--dist worksteal``, as scripts/test.sh runs it).

Worksteal hands each worker a contiguous chunk of the collected order (the first ``len // n``, then the same of
what is left), and a worker that runs out steals the back half of the longest queue. With the ``slow`` tests
(whole DAGs, spark-submit, browsers) collected first, every one of them landed in the first worker's chunk: the
second ran only quick tests, then stole, and the run ended on whichever long test was left, one worker idle for
minutes. Here the slow tests are spread over the chunks by their expected time (heaviest module first, each to
the chunk with the least so far; a module's tests stay together for their module fixtures), each chunk starting
with its share, so the long tests run side by side from the start and every queue ends in quick tests, which
stealing evens out. Nothing depends on the order for correctness: with one worker, or another ``--dist``, or
when a chunk's share would not fit, the order is the slow tests first, as before.

Standard library only; tests/conftest.py's hooks call :func:`configure_node` (on the controller) and
:func:`modifyitems` (on every worker).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

SLOW_SECONDS = 60.0
"""A slow test's expected time where :data:`MODULE_SECONDS` does not name its module."""

MODULE_SECONDS: dict[str, float] = {
    "tests/orchestration/test_dag_e2e.py": 540.0,
    "tests/ui/test_browser.py": 400.0,
    "tests/pipeline/test_collect_fuzz.py": 335.0,
    "tests/ui/test_browser_drain_fill.py": 325.0,
    "tests/orchestration/test_notifications.py": 205.0,
    "tests/orchestration/test_several_clusters.py": 195.0,
    "tests/orchestration/test_windows_e2e.py": 180.0,
    "tests/faults/test_kills.py": 145.0,
    "tests/pipeline/test_jvm.py": 115.0,
    "tests/cli/test_demo.py": 90.0,
}
"""Expected seconds of a module's slow tests together, from a fresh-clone CI run's ``--durations=30`` (2026-12-04,
1,980 s in all on two workers; only the order matters, a module not here counts :data:`SLOW_SECONDS` a test)."""


def configure_node(node: Any) -> None:
    """``pytest_configure_node``, on the xdist controller: tell each worker the ``--dist`` mode (a worker's own
    config says ``dist = "no"``: xdist resets it there; ``workercount`` it passes itself)."""
    node.workerinput["ordering_dist"] = node.config.getoption("dist")


def modifyitems(config: Any, items: list[Any]) -> None:
    """``pytest_collection_modifyitems`` (after -k/-m deselection): the ``slow`` tests first, spread over the
    workers' first chunks under worksteal (:func:`spread`), else in their collected order."""
    workerinput = getattr(config, "workerinput", None) or {}
    worksteal = workerinput.get("ordering_dist") == "worksteal"
    items[:] = spread(
        items,
        int(workerinput.get("workercount", 1)) if worksteal else 1,
        is_slow=lambda item: item.get_closest_marker("slow") is not None,
        group=lambda item: item.nodeid.split("::", 1)[0],
        seconds=lambda module, n: MODULE_SECONDS.get(str(module), n * SLOW_SECONDS),
    )


def chunk_sizes(total: int, workers: int) -> list[int]:
    """The sizes of worksteal's first chunks: each worker in turn gets ``left // workers_left`` of what is left."""
    sizes: list[int] = []
    left = total
    for i in range(workers):
        k = left // (workers - i)
        sizes.append(k)
        left -= k
    return sizes


def spread(
    items: Sequence[T],
    workers: int,
    *,
    is_slow: Callable[[T], bool],
    group: Callable[[T], Hashable],
    seconds: Callable[[Hashable, int], float],
) -> list[T]:
    """``items`` reordered for ``workers`` worksteal chunks (see the module's docstring). ``group`` names a slow
    test's module; ``seconds(group, n)`` is the expected time of that module's ``n`` slow tests."""
    slow = [i for i in items if is_slow(i)]
    quick = [i for i in items if not is_slow(i)]
    if workers < 2 or not slow:
        return slow + quick
    groups: dict[Hashable, list[T]] = {}
    for item in slow:
        groups.setdefault(group(item), []).append(item)
    bins: list[list[T]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for key, members in sorted(groups.items(), key=lambda kv: -seconds(kv[0], len(kv[1]))):
        k = min(range(workers), key=lambda b: load[b])
        bins[k].extend(members)
        load[k] += seconds(key, len(members))
    out: list[T] = []
    rest = iter(quick)
    for members, size in zip(bins, chunk_sizes(len(items), workers), strict=True):
        if len(members) > size:
            return slow + quick
        out.extend(members)
        out.extend(next(rest) for _ in range(size - len(members)))
    return out
