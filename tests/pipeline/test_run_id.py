"""A run id becomes a directory under the work root: ids that would leave it are refused before any path exists."""

from __future__ import annotations

import pytest

from pulsar_rebalance.errors import ConfigError
from pulsar_rebalance.pipeline.context import JobContext, safe_run_dir_name


@pytest.mark.parametrize("run_id", ["..", ".", "", "...", "a/b", "../x", "x/..", "a\\b", "x\x00y"])
def test_run_ids_that_escape_the_work_dir_are_refused(run_id: str, tmp_path) -> None:
    with pytest.raises(ConfigError, match="cannot name a work directory"):
        JobContext(run_id, str(tmp_path))
    with pytest.raises(ConfigError):
        safe_run_dir_name(run_id)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("run_id", "directory"),
    [("manual__2026-11-22T02:00:00+00:00", "manual__2026-11-22T02_00_00_00_00"), ("..a", "..a"), ("run.1", "run.1")],
)
def test_ordinary_run_ids_map_to_one_directory_inside_the_root(run_id: str, directory: str) -> None:
    ctx = JobContext(run_id, "/work/root/")
    assert ctx.work_dir == f"/work/root/{directory}"
    assert ctx.path("topics.parquet") == f"/work/root/{directory}/topics.parquet"
