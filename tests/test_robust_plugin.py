"""A plugin protocol that mixes with the run's robust aggregation rule (tests/plugins/
robust_gossip: the `aggregation` field, the `RobustAggregation` capability and `robust_mix`,
as docs/extending/protocol.md shows them) passes its own exactness-kit tests, and the launcher
holds it to the same checks as d-psgd: a rule its graph cannot honour is refused before any
node starts.

It is registered as an installed distribution would register it (a .dist-info with entry
points on the path), in processes of their own: the registry is read once per process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import ROOT
from tests.rings import ring_file

PLUGIN = ROOT / "tests" / "plugins" / "robust_gossip"


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    site = tmp_path_factory.mktemp("site")
    dist = site / "dfl_robust_gossip-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dfl-robust-gossip\n"
                                   "Version: 0.1.0\n")
    (dist / "entry_points.txt").write_text(
        "[dfl_mesh.protocols]\nrobust-gossip = robust_gossip:RobustGossip\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, (site, PLUGIN, ROOT)))}


def test_the_robust_plugins_own_tests_pass_with_the_kit(plugin_env: dict[str, str],
                                                        tmp_path: Path) -> None:
    checkout = tmp_path / "robust_gossip"  # its own checkout: no configuration of this one
    shutil.copytree(PLUGIN, checkout)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests"], cwd=checkout, env=plugin_env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout, done.stdout[-2000:]


def test_the_plugins_rule_is_checked_against_its_graph(plugin_env: dict[str, str],
                                                       tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "launcher.cli", "--topology", ring_file(tmp_path),
         "--protocol", "robust-gossip", "--dataset", "synthetic",
         "--set", "aggregation={rule: krum, f: 1}", "--out", str(tmp_path / "r")],
        cwd=ROOT, env=plugin_env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert done.stderr == ("dfl-launch: robust-gossip: hyper.aggregation: node 0 has the fewest "
                           "in-neighbours, 2: Krum: f = 1 Byzantine neighbours assumed among 3 "
                           "vectors (the node and 2 neighbours); it needs n > 2f + 2, so f in "
                           "0..0\n")
