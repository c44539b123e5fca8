"""A protocol from another package: built and installed offline into a fresh virtual
environment, it runs through dfl-launch with no file of this project changing, and keeps every
promise a shipped protocol keeps (zmq = inproc bit for bit, formula bits as the paper counts
them, a killed-and-resumed run equal to an uninterrupted one), which its own tests check with
the exactness kit (dfl_mesh.testing)."""

from __future__ import annotations

import ast
import io
import shutil
import subprocess
import sys
import sysconfig
import tokenize
from pathlib import Path

import pytest

from tests.harness import ROOT, assert_transports_identical, launch
from tests.rings import ring_file
from tests.test_resume import SYNTH

PLUGIN = ROOT / "tests" / "plugins" / "median_gossip"
TINY = (*SYNTH, "--rounds", "6", "--eval-every", "3", "--checkpoint-every", "2")


def code_lines(path: Path) -> int:
    """Lines that hold code: no blank lines, comments or docstrings."""
    source = path.read_text()
    docstrings = {node.body[0].value.lineno for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)
                  and isinstance(node.body[0].value.value, str)}
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                        tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        if tok.type == tokenize.STRING and tok.start[0] in docstrings:
            continue
        lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines)


def project_state() -> str:
    """Every changed or untracked file of the checkout, as git sees it."""
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                          capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def plugin_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A new venv that sees this environment's packages (dfl-mesh, torch) and has the plugin
    installed into it, built offline from a copy of its source."""
    tmp = tmp_path_factory.mktemp("plugin")
    # No pip or setuptools of its own: this environment's build the plugin (offline).
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")],
                   check=True)
    python = str(tmp / "venv" / "bin" / "python")
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = subprocess.run([python, "-c", where], capture_output=True, text=True,
                          check=True).stdout.strip()
    # `import` lines of a .pth run at start-up: this environment's site-packages, with its own
    # .pth files (the editable install of dfl-mesh), join the new venv's path.
    Path(site, "dfl_mesh_parent.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    source = tmp / "src"
    shutil.copytree(PLUGIN, source)
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                    "--no-build-isolation", str(source)], check=True)
    return python


def test_the_toy_protocol_is_at_most_30_lines_of_code() -> None:
    assert code_lines(PLUGIN / "median_gossip.py") <= 30


def test_push_sum_on_directed_graphs_is_at_most_35_lines_of_code() -> None:
    """The newcomer's Push-Sum took 62 with the first SDK; tests/test_testing_kit.py runs its
    own tests."""
    assert code_lines(ROOT / "tests" / "plugins" / "push_sum" / "push_sum.py") <= 35


def test_an_installed_plugins_own_tests_pass_with_the_exactness_kit(plugin_python: str) -> None:
    """The plugin's tests (tests/plugins/median_gossip/tests) check it with dfl_mesh.testing, as a
    researcher's package does from its own checkout: zmq = inproc, the state audit, the paper's
    formula bits, a killed-and-resumed run equal to an uninterrupted one."""
    before = project_state()
    source = Path(plugin_python).parents[2] / "src"
    done = subprocess.run([plugin_python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests"], cwd=source, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1].startswith("4 passed"), done.stdout[-2000:]
    assert project_state() == before


def test_an_installed_plugin_brings_a_model_and_a_dataset(plugin_python: str,
                                                          tmp_path: Path) -> None:
    before = project_state()
    topology = ring_file(tmp_path, 4)
    rings = ("--dataset", "rings", "--partition", "iid", "--rounds", "3",
             "--set", "model={name: tiny-mlp, width: 4}", "--set", "rings.samples=200")
    zmq, _ = assert_transports_identical(tmp_path, topology, "d-psgd", *rings,
                                         python=plugin_python)
    size = 2 * 4 + 4 + 4 * 2 + 2  # Linear(2, 4) and Linear(4, 2)
    assert zmq["formula"]["total_bits"] == 3 * 4 * 2 * size * 32
    bad = launch(tmp_path / "bad", topology, "d-psgd", *rings, "--set", "rings.smaples=3",
                 python=plugin_python)
    assert bad.returncode == 2
    assert "rings.smaples: unknown key (did you mean samples?)" in bad.stderr
    assert project_state() == before


def test_without_the_plugin_its_protocol_is_unknown(tmp_path: Path) -> None:
    proc = launch(tmp_path / "run", ring_file(tmp_path), "median-gossip", *TINY)
    assert proc.returncode == 2
    assert "unknown protocol 'median-gossip'" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_a_name_two_packages_register_is_refused_naming_both(plugin_python: str,
                                                             tmp_path: Path) -> None:
    clash = tmp_path / "clash"
    shutil.copytree(PLUGIN, clash)
    text = (clash / "pyproject.toml").read_text()
    (clash / "pyproject.toml").write_text(text.replace('name = "dfl-median-gossip"',
                                                       'name = "dfl-other-gossip"'))
    (clash / "median_gossip.py").rename(clash / "other_gossip.py")
    (clash / "pyproject.toml").write_text((clash / "pyproject.toml").read_text()
                                          .replace("median_gossip", "other_gossip"))
    venv = Path(plugin_python).parent.parent
    target = tmp_path / "venv"
    shutil.copytree(venv, target, symlinks=True)
    python = str(target / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                    "--no-build-isolation", str(clash)], check=True)
    proc = launch(tmp_path / "run", ring_file(tmp_path), "median-gossip", *TINY, python=python)
    assert proc.returncode == 2
    assert "dfl-median-gossip" in proc.stderr and "dfl-other-gossip" in proc.stderr
    assert not (tmp_path / "run").exists()
    assert proc.stderr.count("\n") <= 1  # one line
