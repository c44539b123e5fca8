"""A plugin that cannot be loaded breaks only what names it: dfl_mesh imports, every other
protocol runs, and naming it is one line (exit 2) naming its package; `dfl-launch plugins`
lists it with the reason. The plugin is a real distribution on the path (a .dist-info with
entry points), found by importlib.metadata as an installed one is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness import ROOT

DIST = "broken_plugin-0.1.dist-info"
ENTRY_POINTS = """\
[dfl_mesh.protocols]
broken = broken_plugin:Spec

[dfl_mesh.protocol_nodes]
broken = broken_plugin:Node

[dfl_mesh.models]
oddnet = broken_plugin_parts:NotAModel

[dfl_mesh.sparsifiers]
brokensparse = broken_plugin:Sparsifier
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    site = tmp_path_factory.mktemp("site")
    (site / DIST).mkdir()
    (site / DIST / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\n"
                                          "Version: 0.1\n")
    (site / DIST / "entry_points.txt").write_text(ENTRY_POINTS)
    (site / "broken_plugin.py").write_text(
        'raise ImportError("No module named \'torchvision_extra\'")\n')
    (site / "broken_plugin_parts.py").write_text("NotAModel = 42\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}


def run(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def launch(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return run(env, "-m", "launcher.cli", *argv)


def test_dfl_mesh_imports_and_another_protocol_runs(env: dict[str, str],
                                                    tmp_path: Path) -> None:
    imported = run(env, "-c", "import dfl_mesh")
    assert imported.returncode == 0 and imported.stderr == "", imported.stderr[-2000:]
    done = launch(env, "--topology", "ring20", "--protocol", "d-psgd", "--rounds", "1",
                  "--dataset", "synthetic", "--transport", "inproc", "--quiet", "--no-plots",
                  "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1].startswith("run_dir: ")


@pytest.mark.parametrize("argv, says", [
    (("--protocol", "broken"),
     "--protocol: protocol 'broken' is unavailable: dfl_mesh.protocols entry point 'broken' of "
     "broken-plugin (broken_plugin:Spec) cannot be loaded: ImportError: No module named "
     "'torchvision_extra'"),
    (("--protocol", "d-psgd", "--set", "model={name: oddnet}"),
     "model 'oddnet' is unavailable: dfl_mesh.models entry point 'oddnet' of broken-plugin is "
     "not a ModelConfig whose name is Literal['oddnet']"),
])
def test_naming_the_broken_plugin_is_one_line_naming_its_package(
        env: dict[str, str], tmp_path: Path, argv: tuple[str, ...], says: str) -> None:
    done = launch(env, "--topology", "ring20", *argv, "--dataset", "synthetic",
                  "--out", str(tmp_path / "run"))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and done.stdout == "" and len(lines) == 1, done.stderr[-2000:]
    assert says in lines[0]
    assert not (tmp_path / "run").exists()


def test_the_plugins_listing_shows_what_loaded_and_what_failed(env: dict[str, str]) -> None:
    done = launch(env, "plugins")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {tuple(line.split(maxsplit=2)) for line in done.stdout.splitlines()
            if line.startswith("  ")}
    assert ("d-psgd", "dfl-mesh", "ok") in rows
    failed = {row[0]: row[2] for row in rows if len(row) == 3 and row[1] == "broken-plugin"}
    assert set(failed) == {"broken", "oddnet", "brokensparse"}
    assert all(reason.startswith("FAILED: ") for reason in failed.values())
    assert "ImportError: No module named 'torchvision_extra'" in failed["broken"]
    assert done.stdout.splitlines()[-1] == "4 failed to load"  # the two groups of `broken`
