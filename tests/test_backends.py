"""The backend abstraction: one catalog names every backend, the registry runs the local ones,
and nothing else in the launcher decides by a backend's name."""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.backends.base import HandOffBackend, LocalBackend
from launcher.backends.compose import ComposeBackend
from launcher.backends.hosts import HostsBackend
from launcher.backends.registry import LOCAL_BACKENDS, default_backend, local_backend
from launcher.cli import cli
from launcher.cli import main as launch_main
from launcher.config import backend_catalog
from launcher.config.backend_catalog import BACKENDS, DEFAULT_LOCAL, HOSTS, LOCAL
from launcher.config.run_settings import RunSettings
from launcher.config.run_spec import RunSpec
from launcher.errors import LaunchError
from launcher.node_cli import main as node_main
from launcher.slurm.backend import SlurmBackend

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = ROOT / "launcher"
# The literals that name a backend or the transport its nodes speak ("compose" and "hosts" are
# also ordinary words of the CLI, so only these are held to the rule).
NAMES = {s.name for s in LOCAL.values()} | {s.transport for s in BACKENDS.values()}
ALLOWED = {LAUNCHER / "backends", Path(backend_catalog.__file__).resolve()}
TRI = "nodes: [{id: 0}, {id: 1}, {id: 2}]\nedges: [[0, 1], [1, 2], [2, 0]]\n"
FIXED = "nodes: [{id: 0, port: 7301}, {id: 1, port: 7302}]\nedges: [[0, 1]]\n"


def named_literals(source: str, label: str) -> list[str]:
    """`label:line: 'name'` for every string constant of `source` that is a backend's name."""
    return [f"{label}:{node.lineno}: {node.value!r}" for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and node.value in NAMES]


def test_only_the_backends_and_their_catalog_spell_a_backend_name() -> None:
    """Every decision by backend (defaults, choices, checks) goes through the catalog or the
    registry, so a new backend touches no launcher module outside them."""
    modules = [p for p in LAUNCHER.rglob("*.py")
               if not any(p == a or a in p.parents for a in ALLOWED)]
    assert len(modules) > 20
    found = [hit for p in modules
             for hit in named_literals(p.read_text(), str(p.relative_to(ROOT)))]
    assert found == []


def test_the_check_sees_a_comparison() -> None:
    """The scan above catches the string checks the abstraction replaced, and not a name
    inside a message."""
    source = ('if plan.transport == "inproc" or config["transport"] not in ("zmq",):\n'
              '    raise LaunchError("--secure: --transport inproc has none")\n')
    assert named_literals(source, "s") == ["s:1: 'inproc'", "s:1: 'zmq'"]


def test_every_local_spec_has_one_backend_and_the_default_is_one_of_them() -> None:
    assert list(LOCAL_BACKENDS) == list(LOCAL)
    for name, backend in LOCAL_BACKENDS.items():
        assert isinstance(backend, LocalBackend)
        assert backend.spec is LOCAL[name] and backend.name == name
        assert local_backend(name) is backend
    assert default_backend().name == DEFAULT_LOCAL == RunSettings().transport
    assert set(LOCAL) | {HOSTS.name, ComposeBackend.spec.name, SlurmBackend.spec.name} == set(
        BACKENDS)
    for cls in (HostsBackend, ComposeBackend, SlurmBackend):
        assert issubclass(cls, HandOffBackend) and not cls.spec.local


@pytest.mark.parametrize("name", ["carrier-pigeon", None, 3])
def test_an_unknown_name_lists_the_choices(name: object) -> None:
    with pytest.raises(LaunchError) as info:
        local_backend(name)
    assert str(info.value) == f"transport: must be {' or '.join(LOCAL)}, got {name!r}"


def run(entry: Callable[[], None], args: list[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> tuple[object, str, str]:
    """An entry point in this process with its own argv: exit code, stdout, stderr."""
    monkeypatch.setattr(sys, "argv", ["prog", *args])
    with pytest.raises(SystemExit) as info:
        entry()
    out, err = capsys.readouterr()
    return info.value.code, out, err


def test_an_unknown_transport_is_exit_2_naming_the_choices(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.yaml").write_text(TRI)
    code, out, err = run(launch_main, ["plan", "--topology", str(tmp_path / "t.yaml"),
                                       "--protocol", "d-psgd", "--transport", "carrier-pigeon",
                                       "-o", str(tmp_path / "plan.json")], monkeypatch, capsys)
    assert (code, out, err.count("\n")) == (2, "", 1), err
    assert err.startswith("dfl-launch: ") and "carrier-pigeon" in err
    assert all(f"'{name}'" in err for name in LOCAL), err
    assert not (tmp_path / "plan.json").exists()


def test_a_config_naming_an_unknown_backend_is_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.yaml").write_text(TRI)
    code, out, err = run(launch_main, ["plan", "--topology", str(tmp_path / "t.yaml"),
                                       "--protocol", "d-psgd", "--dataset", "synthetic",
                                       "--set", "transport=carrier-pigeon",
                                       "-o", str(tmp_path / "plan.json")], monkeypatch, capsys)
    assert (code, out) == (2, "")
    assert err == (f"dfl-launch: transport: must be {' or '.join(LOCAL)}, "
                   "got 'carrier-pigeon'\n")


def test_help_lists_every_local_backend() -> None:
    done = CliRunner().invoke(cli, ["--help"])
    assert done.exit_code == 0
    flat = " ".join(done.output.split())
    assert f"[{'|'.join(LOCAL)}]" in flat
    for spec in LOCAL.values():
        assert " ".join(f"{spec.name}: {spec.summary}".split()) in flat


@pytest.mark.parametrize("name", [n for n, s in LOCAL.items() if not s.secure])
def test_a_backend_without_curve_refuses_secure(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.yaml").write_text(TRI)
    code, _, err = run(launch_main, ["plan", "--topology", str(tmp_path / "t.yaml"),
                                     "--protocol", "d-psgd", "--dataset", "synthetic",
                                     "--secure", "--transport", name,
                                     "-o", str(tmp_path / "plan.json")], monkeypatch, capsys)
    assert (code, err) == (2, "dfl-launch: --secure: it secures ZeroMQ sockets; "
                              f"--transport {name} has none\n")


@pytest.mark.parametrize("name", [n for n, s in LOCAL.items()
                                  if s.transport != HOSTS.transport])
def test_dfl_node_refuses_a_backend_whose_nodes_it_cannot_run(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "t.yaml").write_text(FIXED)
    code, _, err = run(node_main, ["--topology", str(tmp_path / "t.yaml"), "--protocol",
                                   "d-psgd", "--node-id", "0", "--transport", name,
                                   "--out", str(tmp_path / "run")], monkeypatch, capsys)
    assert (code, err) == (2, f"dfl-node: --transport: dfl-node runs over {HOSTS.transport}\n")
    assert not (tmp_path / "run").exists()


def test_the_hosts_backend_writes_the_plan_dfl_launch_plan_writes(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(FIXED)
    backend = HostsBackend()
    req = RunSpec(topology=str(tmp_path / "t.yaml"), protocol="d-psgd",
                  options={"dataset": "synthetic"})
    plan = backend.resolve(req)
    path = backend.hand_off(plan, tmp_path / "deep" / "plan.json")
    assert path == tmp_path / "deep" / "plan.json"
    assert type(plan).load(path).section_hashes() == plan.section_hashes()
    assert plan.transport == DEFAULT_LOCAL and plan.secure is None
