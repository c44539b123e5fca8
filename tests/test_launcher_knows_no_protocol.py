"""The launcher knows no protocol by name: what it needs per protocol is declared by the
protocol (protocols/describe.py) and read through the registry."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import click
import pytest

from protocols.declaration import ProtocolDeclaration
from protocols.registry import (
    PROTOCOLS,
    dataset_preparers,
    launch_commands,
    node_class,
    report_families,
)
from tests.harness import ROOT

FAMILY_PACKAGES = ("gossip", "dmflsq", "ssdfl", "dsc")
NAMES = sorted({*PROTOCOLS, *FAMILY_PACKAGES})


def named(name: str) -> re.Pattern[str]:
    """The name as a word of its own, in any case: `dsc` is not in `dsc-max`, `sdfl` is not
    in `ssdfl`, but `DSC's` and `protocols.dsc` are named."""
    return re.compile(rf"(?<![\w-]){re.escape(name)}(?![\w-])", re.IGNORECASE)


def launcher_files() -> list[Path]:
    return sorted(p for p in (ROOT / "launcher").rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)


@pytest.mark.parametrize("name", NAMES)
def test_no_launcher_file_names_the_protocol(name: str) -> None:
    pattern = named(name)
    found = [f"{path.relative_to(ROOT)}:{k}: {line.strip()}"
             for path in launcher_files()
             for k, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if pattern.search(line)]
    assert not found, "\n".join(found)


def test_the_word_match_tells_protocols_apart() -> None:
    assert named("sdfl").search("sdfl run") and not named("sdfl").search("ssdfl")
    assert not named("dsc").search("dsc-max") and named("dsc").search("DSC's depth")
    assert named("dsc").search("from protocols.dsc.depth import bound")


def test_every_protocol_is_in_one_report_family_led_by_a_registered_protocol() -> None:
    families = report_families()
    members = [name for family in families.values() for name in family.members]
    assert sorted(members) == sorted(PROTOCOLS)
    for name, family in families.items():
        assert PROTOCOLS[name].report_family == name  # the lead is a member of its family
        assert family.members == tuple(p for p in PROTOCOLS if PROTOCOLS[p].report_family == name)


def test_declared_commands_and_datasets_reach_the_launcher() -> None:
    from launcher.cli import cli
    from launcher.data.prepare import datasets

    assert launch_commands(), "some protocol brings a dfl-launch command"
    context = click.Context(cli)
    for command in launch_commands():
        assert cli.get_command(context, str(command.name)) is command
        assert str(command.name) in cli.list_commands(context)
    assert set(dataset_preparers()) <= set(datasets())


def test_a_node_imports_its_own_protocol_and_no_other() -> None:
    """What `dfl-node` imports, then its plan's protocol by name: the registry loads that entry
    point alone (a host's server forks its nodes after just this), and its node class subclasses
    the spec of the whole table."""
    probe = ("import sys, launcher.node_cli\n"
             "from protocols.registry import PROTOCOLS, node_class\n"
             "cls = node_class('d-psgd')\n"
             "loaded = sorted(m for m in sys.modules if m.startswith('protocols.')\n"
             "                and m.count('.') >= 2 and m.split('.')[1] in FAMILIES)\n"
             "print(' '.join(loaded))\n"
             "assert cls.spec is PROTOCOLS['d-psgd']  # the node class of the table's spec\n")
    done = subprocess.run([sys.executable, "-c", f"FAMILIES = {FAMILY_PACKAGES!r}\n{probe}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    families = {name.split(".")[1] for name in done.stdout.split()}
    assert families == {"gossip"}, done.stdout


@pytest.mark.parametrize("name", list(PROTOCOLS))
def test_a_node_class_names_its_spec_and_inherits_no_part_of_it(name: str) -> None:
    """The launcher reads the spec, a node runs the node class: the spec is the node class's
    `spec`, never a base of it, and no node class declares what the spec does, so the two
    cannot disagree (a Hyper default, a capability)."""
    from protocols.node_base import ProtocolNode

    spec, node = PROTOCOLS[name], node_class(name)
    assert node.spec is spec and issubclass(node, ProtocolNode)
    assert not [cls for cls in node.__mro__ if issubclass(cls, ProtocolDeclaration)]
    declared = {f.name for f in fields(ProtocolDeclaration)} | {
        k for k, v in vars(ProtocolDeclaration).items() if isinstance(v, property)} | {
        "coordinate", "run_keys"}
    for cls in node.__mro__:
        if issubclass(cls, ProtocolNode) and cls is not ProtocolNode:  # node classes, not the base
            assert not declared & set(vars(cls)), (cls.__name__, declared & set(vars(cls)))
