"""Key pairs for `--secure` runs: `dfl-launch keys`, the keys a local launch makes for itself,
and the plan's `secure` section.

    dfl-launch keys --topology T -o DIR

makes one CURVE key pair per node of the topology, one for a server-based protocol's hub
(`aggregator`), and one each for the collector and the pre-phase coordinator: `DIR/<name>.key`
holds the public key and `DIR/<name>.key_secret` the pair (mode 0600). Files are written in
ZeroMQ's certificate format and never overwritten: a name already taken is an error before
anything is written. A host needs the public keys of the run (they also go into the plan) and
only its own secret file.

`DIR/results.key` (mode 0600) is the run's results key (dfl_node/runner/results_seal.py), for
runs with or without --secure: a plan made with `--keys DIR` takes it instead of drawing its
own, so that hosts that each resolve the plan (`dfl-node --topology ... --keys DIR`) seal their
records with the key of the collector's plan.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
import zmq

from dfl_node.plan import RunPlan
from dfl_node.runner.results_seal import KEY_BYTES, new_results_key, valid_results_key
from dfl_node.settings.secure import SecureSection
from dfl_node.transports.encryption import (
    AGGREGATOR,
    COLLECTOR,
    COORDINATOR,
    CurveError,
    key_name,
    node_key_name,
    read_certificate,
)
from launcher.config.backend_catalog import local_spec
from launcher.errors import LaunchError
from topologies.errors import TopologyError
from topologies.loader import load_topology, resolve_topology_path

PUBLIC, SECRET = ".key", ".key_secret"
RESULTS_KEY = "results.key"  # the secret records to the collector are sealed with


def certificate_text(name: str, public: bytes, secret: bytes | None) -> str:
    kind = "Public" if secret is None else "**Secret**"
    lines = [f"#   ZeroMQ CURVE {kind} Certificate: dfl-mesh key {name}", "metadata", "curve",
             f'    public-key = "{public.decode()}"']
    if secret is not None:
        lines.append(f'    secret-key = "{secret.decode()}"')
    return "\n".join(lines) + "\n"


def write_new(path: Path, text: str, mode: int) -> None:
    """Create `path` with `mode` from the start (a secret is never readable by others, not
    even for a moment); an existing file is an error."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w", encoding="ascii") as out:
        out.write(text)


def make_keys(directory: Path, names: Sequence[str]) -> None:
    """A fresh key pair per name in `directory`; a LaunchError if any file exists already."""
    taken = [directory / f"{n}{s}" for n in names for s in (PUBLIC, SECRET)
             if (directory / f"{n}{s}").exists()]
    if taken:
        raise LaunchError(f"{taken[0]}: exists; keys are never overwritten (pick another -o)")
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        for name in names:
            public, secret = zmq.curve_keypair()
            write_new(directory / f"{name}{PUBLIC}", certificate_text(name, public, None), 0o644)
            write_new(directory / f"{name}{SECRET}", certificate_text(name, public, secret),
                      0o600)
    except OSError as exc:
        raise LaunchError(f"{directory}: cannot write key files: {exc.strerror or exc}") from None


def plan_key_names(plan: RunPlan) -> list[str]:
    """Every key a run uses: its nodes', the collector's and (with a pre-phase) the
    coordinator's."""
    return [*(key_name(plan, i) for i in plan.ids), COLLECTOR,
            *([COORDINATOR] if plan.prephase else [])]


def read_results_key(directory: Path) -> str | None:
    """The results key of `directory` (RESULTS_KEY, made by `dfl-launch keys`), None if it has
    none; a LaunchError for a file that is not one."""
    path = directory / RESULTS_KEY
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise LaunchError(f"{path}: cannot read the results key: {exc}") from None
    if not valid_results_key(text):
        raise LaunchError(f"{path}: is not a results key ({2 * KEY_BYTES} hex digits)")
    return text


def secure_plan(plan: RunPlan, config: dict[str, Any], local_dir: Path | None) -> RunPlan:
    """The plan with the results key of `--keys DIR` when it holds one (hosts that resolve
    the plan themselves must share it: the plan's own is drawn afresh by each), and with its
    `secure` section when the config says `secure`.

    `local_dir` is given when this host runs the whole mesh (a local launch): every secret key
    must then be readable here. A LaunchError names a missing or unusable file."""
    keys = config.get("keys")
    shared = read_results_key(Path(keys)) if keys is not None else None
    if shared is not None:
        plan = replace(plan, results_key=shared)
    if not config.get("secure"):
        if keys is not None and shared is None:
            raise LaunchError(f"--keys {keys}: holds no {RESULTS_KEY} (dfl-launch keys makes "
                              "it), and only a --secure run uses its other keys")
        return plan
    if not local_spec(plan.transport).secure:
        raise LaunchError("--secure: it secures ZeroMQ sockets; "
                          f"--transport {plan.transport} has none")
    if not zmq.has("curve"):
        raise LaunchError("--secure: this host's libzmq was built without CURVE")
    names = plan_key_names(plan)
    directory = key_directory(keys, local_dir, names)
    suffix = PUBLIC if local_dir is None else SECRET
    try:
        public = {n: read_certificate(directory / f"{n}{suffix}", secret=suffix == SECRET)[0]
                  for n in names}
    except CurveError as exc:
        raise LaunchError(str(exc)) from None
    return replace(plan, secure=SecureSection(
        keys_dir=str(directory), public_keys={n: k.decode() for n, k in public.items()}))


def key_directory(keys: str | None, local_dir: Path | None, names: Sequence[str]) -> Path:
    """Where the run's keys are: `--keys DIR`, else a local launch's own directory, made first
    when it does not exist yet (so a resumed run keeps its keys)."""
    if keys is not None:
        return Path(keys).resolve()
    if local_dir is None:
        raise LaunchError("--secure: give --keys DIR (made by dfl-launch keys), so that every "
                          "host uses the same keys")
    if not local_dir.exists():
        make_keys(local_dir, names)
    return local_dir.resolve()


@click.command("keys")
@click.option("--topology", required=True, help="Topology file or shipped name (ring20, ...).")
@click.option("-o", "output", type=click.Path(path_type=Path), required=True,
              help="Directory for the key files (created; existing keys are never overwritten).")
def keys_cmd(topology: str, output: Path) -> None:
    """Make the CURVE key pairs of a --secure mesh (one per node, the aggregator, the collector
    and the coordinator) and the results key every run's records are sealed with."""
    try:
        topo = load_topology(resolve_topology_path(topology))
    except TopologyError as exc:
        raise LaunchError(str(exc)) from None
    names = [*(node_key_name(i) for i in topo.ids), AGGREGATOR, COLLECTOR, COORDINATOR]
    if (output / RESULTS_KEY).exists():
        raise LaunchError(f"{output / RESULTS_KEY}: exists; keys are never overwritten "
                          "(pick another -o)")
    make_keys(output, names)
    write_new(output / RESULTS_KEY, new_results_key() + "\n", 0o600)
    print(f"{len(names)} key pairs and a results key in {output}")
