"""The run options `dfl-launch` and `dfl-node --topology` share, and the RunSpec they make.

Kept apart from both CLIs (and light to import) so that one host's `dfl-node` resolves a plan
from exactly the options, defaults and parsing the launcher uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from dfl_node.state.checkpoint_check import ON_CORRUPT
from launcher.config.backend_catalog import LOCAL, transport_help
from launcher.config.run_spec import WIRE_OPTIONS, RunSpec, options_of
from launcher.errors import LaunchError


@dataclass(frozen=True)
class ViewOptions:
    """How `dfl-launch` presents a run: not part of the run, so not in the plan."""

    quiet: bool = False
    plots: bool = True


RUN_OPTIONS: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
    click.option("--topology", default=None, help="Topology file or shipped name (ring20, ...)."),
    click.option("--protocol", default=None,
                 help="Protocol name (an unknown name lists the known ones)."),
    click.option("--config", "config_file", type=click.Path(path_type=Path), default=None,
                 help="YAML config layered over the protocol's defaults."),
    click.option("--rounds", type=int, default=None,
                 help="Rounds to run (default: the protocol's run defaults)."),
    click.option("--seed", type=int, default=None,
                 help="Fixes the initial model, partition, evaluation subset and batches."),
    click.option("--seeds", default=None, metavar="A-B",
                 help="Run once per seed A..B, one run directory per seed under --out."),
    click.option("--dataset", default=None,
                 help="fmnist, cifar10, synthetic, or a dataset a protocol brings."),
    click.option("--data-root", default=None, metavar="DIR",
                 help="Where the dataset's files are (default: the system's copy or a download)."),
    click.option("--partition", default=None, metavar="SPEC",
                 help="Training data over nodes: iid, shards:C or dirichlet:ALPHA[:MIN]."),
    click.option("--eval-every", type=int, default=None, metavar="K",
                 help="Evaluate every node every K rounds (and after the last)."),
    click.option("--checkpoint-every", type=int, default=None,
                 help="Save every node's state every K rounds (0: never; default 10)."),
    click.option("--on-corrupt", type=click.Choice(ON_CORRUPT), default=None,
                 help="When --resume refuses a checkpoint file (a digest mismatch, a cut file, "
                      "another round's file): resume from the newest round every node holds "
                      "intact (fallback), or stop (exit 2). Also with --resume."),
    click.option("--transport", type=click.Choice(list(LOCAL)), default=None,
                 help=transport_help()),
    click.option("--secure", is_flag=True, default=None,
                 help="ZeroMQ CURVE on every socket: only the run's keys get in."),
    click.option("--keys", default=None, metavar="DIR",
                 help="Key files (dfl-launch keys): a --secure run's (default: made into "
                      "RUN_DIR/keys by a local launch), and DIR/results.key, the run's results "
                      "key, which hosts resolving the plan themselves must share."),
    click.option("--deadline", type=float, default=None, metavar="SECONDS",
                 help="A neighbour that answers no heartbeat for this long is dead (default 10; "
                      "wire.deadline_s)."),
    click.option("--on-failure", type=click.Choice(["stop", "continue"]), default=None,
                 help="When a node dies: end the run (stop, default) or go on without it "
                      "(continue; protocols with rules for losing a node)."),
    click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                 help="Override any config key (dotted for nested; bare hyper-parameters ok)."),
]


def run_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(RUN_OPTIONS):
        func = option(func)
    return func


def parse_seeds(text: str | None) -> tuple[int, ...]:
    if text is None:
        return ()
    first, sep, last = text.partition("-")
    try:
        lo, hi = int(first), int(last if sep else first)
    except ValueError:
        raise LaunchError(f"--seeds: expected A-B (e.g. 0-4), got {text!r}") from None
    if lo < 0 or hi < lo:
        raise LaunchError(f"--seeds: expected 0 <= A <= B, got {text!r}")
    return tuple(range(lo, hi + 1))


def command_line_spec(params: dict[str, Any]) -> RunSpec:
    """The RunSpec of the run options as click parsed them."""
    return RunSpec.of(topology=params["topology"], protocol=params["protocol"],
                      config_file=params["config_file"], options=options_of(params),
                      sets=params["sets"], seeds=parse_seeds(params["seeds"]))


def command_line(spec: RunSpec) -> list[str]:
    """The `dfl-launch` arguments whose `command_line_spec` is `spec`: to start the run in a
    process of its own, or to show the command that repeats it. Every option's flag is its
    name, dashed (`data_root`: `--data-root`, `deadline`: `--deadline`)."""
    argv = ["--topology", str(spec.topology), "--protocol", str(spec.protocol)]
    if spec.config_file is not None:
        argv += ["--config", str(spec.config_file)]
    named = {**spec.options.model_dump(exclude={"wire"}),
             **{name: (spec.options.wire or {}).get(key) for name, key in WIRE_OPTIONS.items()}}
    for name, value in named.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            argv += [flag] if value else []
        elif value is not None:
            argv += [flag, str(value)]
    if spec.seeds:
        argv += ["--seeds", f"{spec.seeds[0]}-{spec.seeds[-1]}"]
    for override in spec.sets:
        argv += ["--set", override.item]
    return argv
