"""The suite's order on several workers (tests/ordering.py): the slow tests spread over worksteal's first chunks."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import ordering

ROOT = Path(__file__).resolve().parents[1]


def _spread(items: list[str], workers: int, weights: dict[str, float] | None = None) -> list[str]:
    weights = weights or {}
    return ordering.spread(
        items,
        workers,
        is_slow=lambda t: t.startswith("slow"),
        group=lambda t: t.split(":")[0],
        seconds=lambda module, n: weights.get(str(module), 10.0 * n),
    )


def test_chunk_sizes_are_worksteals_first_distribution() -> None:
    # xdist's WorkStealingScheduling.check_schedule: node i of n gets len(pending) // (n - i) of what is left
    assert ordering.chunk_sizes(11, 2) == [5, 6]
    assert ordering.chunk_sizes(10, 3) == [3, 3, 4]
    assert sum(ordering.chunk_sizes(1638, 2)) == 1638


def test_each_chunk_starts_with_its_share_of_the_slow_tests_and_a_module_stays_together() -> None:
    quick = [f"q{i}" for i in range(10)]
    slow = ["slowA:1", "slowA:2", "slowA:3", "slowB:1", "slowC:1", "slowC:2"]
    items = slow[:3] + quick[:5] + slow[3:] + quick[5:]

    out = _spread(items, 2)

    assert sorted(out) == sorted(items)  # a permutation
    first, second = out[:8], out[8:]  # chunk sizes 8 and 8
    # by expected time: A (3 tests) to the first chunk, C (2) to the second, B (1) to the second (2 < 3)
    assert first[:3] == ["slowA:1", "slowA:2", "slowA:3"] and not any(t.startswith("slow") for t in first[3:])
    assert second[:3] == ["slowC:1", "slowC:2", "slowB:1"] and not any(t.startswith("slow") for t in second[3:])
    assert [t for t in out if t.startswith("q")] == quick  # the quick ones keep their order


def test_the_expected_time_decides_not_the_count() -> None:
    items = ["slowA:1", "slowA:2", "slowA:3", "slowB:1", "slowC:1"] + [f"q{i}" for i in range(11)]
    out = _spread(items, 2, weights={"slowB": 300.0})  # one long test outweighs three short ones
    assert out[0] == "slowB:1" and out[8:11] == ["slowA:1", "slowA:2", "slowA:3"] and out[11] == "slowC:1"


def test_one_worker_or_a_chunk_too_small_keeps_the_slow_tests_first() -> None:
    items = ["q1", "slowA:1", "q2", "slowB:1"]
    assert _spread(items, 1) == ["slowA:1", "slowB:1", "q1", "q2"]
    many = [f"slowA:{i}" for i in range(5)] + ["q1"]  # module A alone is more than a chunk of 3
    assert _spread(many, 2) == many
    assert _spread(["q1", "q2"], 2) == ["q1", "q2"]


@pytest.mark.timeout(300)
def test_under_xdist_worksteal_each_worker_starts_with_slow_tests(tmp_path: Path) -> None:
    """A real two-worker run of a small suite wired like tests/conftest.py: each worker's first test is a slow one,
    from a different module (without the controller telling the workers the --dist mode, the second worker's
    chunk held quick tests only)."""
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n", encoding="utf-8")
    (tmp_path / "conftest.py").write_text(
        textwrap.dedent(
            """
            import pytest
            from tests import ordering

            @pytest.hookimpl(trylast=True)
            def pytest_collection_modifyitems(config, items):
                ordering.modifyitems(config, items)

            @pytest.hookimpl(optionalhook=True)
            def pytest_configure_node(node):
                ordering.configure_node(node)

            @pytest.fixture(autouse=True)
            def _log(request):
                with open("ran.log", "a") as f:
                    f.write(f"{os.environ['PYTEST_XDIST_WORKER']} {request.node.nodeid}\\n")
            """
        ).replace("import pytest", "import os\nimport pytest", 1),
        encoding="utf-8",
    )
    for module, n in (("test_a.py", 3), ("test_b.py", 2)):
        body = "".join(f"@pytest.mark.slow\ndef test_slow_{i}():\n    pass\n\n" for i in range(n))
        (tmp_path / module).write_text("import pytest\n\n" + body, encoding="utf-8")
    (tmp_path / "test_q.py").write_text("".join(f"def test_q_{i}():\n    pass\n\n" for i in range(20)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "worksteal", "-q"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    first: dict[str, str] = {}
    for line in (tmp_path / "ran.log").read_text(encoding="utf-8").splitlines():
        worker, nodeid = line.split(" ", 1)
        first.setdefault(worker, nodeid)
    assert len(first) == 2 and all("::test_slow_" in t for t in first.values()), first
    assert {t.split("::")[0] for t in first.values()} == {"test_a.py", "test_b.py"}
