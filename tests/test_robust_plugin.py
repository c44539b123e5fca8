"""A plugin protocol that mixes with the run's robust aggregation rule (tests/plugins/
robust_gossip: the `aggregation` field, the `RobustAggregation` capability and `robust_mix`,
as docs/extending/protocol.md shows them) passes its own exactness-kit tests, and the launcher
holds it to the same checks as d-psgd: a rule its graph cannot honour is refused before any
node starts.

It is registered as an installed distribution would register it (a .dist-info with entry
points on the path), in processes of their own: the registry is read once per process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import ROOT, installed_env, run_plugin_tests
from tests.rings import ring_file

PLUGIN = ROOT / "tests" / "plugins" / "robust_gossip"


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return installed_env(tmp_path_factory.mktemp("site"), "dfl-robust-gossip",
                         "[dfl_mesh.protocols]\nrobust-gossip = robust_gossip:RobustGossip\n",
                         PLUGIN)


def test_the_robust_plugins_own_tests_pass_with_the_kit(plugin_env: dict[str, str],
                                                        tmp_path: Path) -> None:
    out = run_plugin_tests(PLUGIN, plugin_env, tmp_path)
    assert "2 passed" in out, out[-2000:]


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
