"""The `decide` example in docs/reference.md runs as documented (bundleData derived from lastStats when absent)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference.md"


def test_readme_decide_example_output_matches():
    text = REFERENCE.read_text()
    scenario = re.search(
        r"echo '(\{\"shedding\": \"ThresholdShedder\".*?)' \\\n  \| pulsar-rebalance decide -", text, re.S
    )
    assert scenario, "the decide example in docs/reference.md moved; update this test"
    out = subprocess.run(
        [sys.executable, "-m", "pulsar_rebalance.cli", "decide", "-"],
        input=scenario.group(1),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    cycle = json.loads(out.stdout)["cycles"][0]
    assert (cycle["label"], cycle["reason"]) == ("Success", "Overloaded")
    [unload] = cycle["unloads"]
    assert unload["bundle"] == "t/ns/0x00000000_0x80000000" and unload["destination"] is None
    assert unload["reason"] in text  # the reference shows the exact reason string
