"""A misspelt key anywhere in a run's configuration is exit 2, one line naming where it came
from, its dotted path and the key that was meant, and no run directory is made: in every
section of every protocol's config (top level, model, hyper and its nested sections such as the
compressor, link, tdma, wire...), through --set and through --config files, and in topology
files' node and edge fields.

The sections are found from each protocol's resolved config, so a section a protocol adds later
is covered without an edit here."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from launcher.cli import main
from launcher.config.layers import resolve_config
from protocols.registry import PROTOCOLS
from tests.rings import ring_file


def typo(key: str) -> str:
    """A plausible slip of the finger: two letters swapped, or the last one doubled."""
    if len(key) >= 5 and key[1] != key[2]:
        return key[0] + key[2] + key[1] + key[3:]
    return key + key[-1]


def sections(config: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The dotted path of every mapping in the config, the top level included."""
    yield path
    for key, value in config.items():
        if isinstance(value, dict) and value:
            yield from sections(value, (*path, key))


def nested(path: tuple[str, ...], key: str, value: Any) -> dict[str, Any]:
    layer: dict[str, Any] = {key: value}
    for part in reversed(path):
        layer = {part: layer}
    return layer


def cases() -> Iterator[Any]:
    for protocol in PROTOCOLS:
        config = resolve_config(protocol, None, {}, ())
        config.pop("protocol")
        for path in sections(config):
            section = config
            for part in path:
                section = section[part]
            key = next(k for k in section if k != "name" or len(section) == 1)
            for way in ("set", "config"):
                yield pytest.param(protocol, path, key, section[key], way,
                                   id=f"{protocol}-{'.'.join(path) or 'top'}-{way}")


def flow(value: Any) -> str:
    """`value` as one line of YAML, as a user types it after `--set key=`."""
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def run_cli(args: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", ["dfl-launch", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    return int(exited.value.code or 0)


def typo_args(protocol: str, path: tuple[str, ...], key: str, value: Any, way: str,
              tmp_path: Path) -> tuple[list[str], str]:
    """A case's `dfl-launch` arguments (its run directory tmp_path/run), and where its error
    line says the misspelt key came from."""
    wrong = typo(key)
    args = ["--topology", ring_file(tmp_path), "--protocol", protocol,
            "--out", str(tmp_path / "run")]
    if way == "set":
        return [*args, "--set", f"{'.'.join((*path, wrong))}={flow(value)}"], \
            f"--set {'.'.join((*path, wrong))}="
    file = tmp_path / "typo.yaml"
    file.write_text(yaml.safe_dump(nested(path, wrong, value)))
    return [*args, "--config", str(file)], str(file)


@pytest.mark.parametrize(("protocol", "path", "key", "value", "way"), list(cases()))
def test_a_misspelt_key_is_exit_2_with_its_path_and_the_key_meant(
        protocol: str, path: tuple[str, ...], key: str, value: Any, way: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    wrong = typo(key)
    out = tmp_path / "run"
    args, source = typo_args(protocol, path, key, value, way, tmp_path)
    assert run_cli(args, monkeypatch) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert source in err[0]
    assert f"{'.'.join((*path, wrong))}: unknown key (did you mean {key}?)" in err[0], err[0]
    assert not out.exists()


def topology_text(node0: str = "{id: 0}", edge0: str = "[0, 1]") -> str:
    """A ring of four whose node 0 and edge 0 are written as given."""
    nodes = [node0, *(f"{{id: {i}}}" for i in range(1, 4))]
    edges = [edge0, *(f"[{i}, {(i + 1) % 4}]" for i in range(1, 4))]
    return "nodes:\n" + "".join(f"  - {n}\n" for n in nodes) + \
        "edges:\n" + "".join(f"  - {e}\n" for e in edges)


# case -> (node 0, edge 0, the path at fault, the key meant)
TOPOLOGY_TYPOS = {
    "edge": ("{id: 0}", "{u: 0, v: 1, latncy_ms: 2.0}", "edges[0].latncy_ms", "latency_ms"),
    "node-field": ("{id: 0, prot: 47001}", "[0, 1]", "nodes[0].prot", "port"),
    "node-attribute": ("{id: 0, compute_sm: 3.0}", "[0, 1]", "nodes[0].compute_sm",
                       "compute_ms"),
}


def topology_cases() -> list[str]:
    return [*TOPOLOGY_TYPOS, *(
        f"{name}-attribute" for name, cls in PROTOCOLS.items() if cls.node_attributes)]


def topology_typo_args(what: str, tmp_path: Path) -> tuple[list[str], str, str]:
    """A topology case's `dfl-launch` arguments (its run directory tmp_path/run), the path at
    fault in the file and the key meant."""
    if what in TOPOLOGY_TYPOS:
        node0, edge0, where, meant = TOPOLOGY_TYPOS[what]
    else:
        attributes = PROTOCOLS[what.removesuffix("-attribute")].node_attributes
        assert attributes is not None
        meant = next(iter(attributes.model_fields))
        node0, edge0, where = f"{{id: 0, {typo(meant)}: null}}", "[0, 1]", f"nodes[0].{typo(meant)}"
    file = tmp_path / "topo.yaml"
    file.write_text(topology_text(node0, edge0))
    return ["--topology", str(file), "--protocol", "d-psgd", "--out", str(tmp_path / "run")], \
        where, meant


@pytest.mark.parametrize("what", topology_cases())
def test_a_misspelt_topology_key_is_exit_2_with_its_path_and_the_key_meant(
        what: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    args, where, meant = topology_typo_args(what, tmp_path)
    file = tmp_path / "topo.yaml"
    out = tmp_path / "run"
    assert run_cli(args, monkeypatch) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert str(file) in err[0] and f"{where}: unknown key (did you mean {meant}?)" in err[0], err
    assert not out.exists()


BARE_KEYS = [("lrr=0.1", "hyper.lr"), ("batchsize=4", "hyper.batch_size"), ("roundz=3", "rounds")]


def bare_key_args(given: str, tmp_path: Path) -> list[str]:
    return ["--topology", ring_file(tmp_path), "--protocol", "d-psgd", "--set", given,
            "--out", str(tmp_path / "run")]


@pytest.mark.parametrize(("given", "meant"), BARE_KEYS)
def test_a_bare_key_of_a_section_is_told_its_section(
        given: str, meant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    """`--set lrr=0.1` meant `hyper.lr`: the suggestion looks one section down when no key of
    the level given is close (before: `lrr: unknown key`, no suggestion)."""
    out = tmp_path / "run"
    assert run_cli(bare_key_args(given, tmp_path), monkeypatch) == 2
    err = capfd.readouterr().err.strip().splitlines()
    key = given.split("=")[0]
    assert err == [f"dfl-launch: --set {given}: {key}: unknown key (did you mean {meant}?)"]
    assert not out.exists()
