"""`dfl-launch`: a topology file and a protocol in, a finished run directory out.

Exit codes: 0 success, 1 a failed run, 2 bad input, 130 interrupted. Bad input never reaches a
node: it is one line on stderr, naming the file or option and the reason.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from launcher.errors import LaunchError
from launcher.run import Request, launch, write_plan_only

RUN_OPTIONS: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
    click.option("--topology", default=None, help="Topology file or shipped name (ring20, ...)."),
    click.option("--protocol", default=None, help="Protocol name (d-psgd, ...)."),
    click.option("--config", "config_file", type=click.Path(path_type=Path), default=None,
                 help="YAML config layered over the protocol's defaults."),
    click.option("--rounds", type=int, default=None),
    click.option("--seed", type=int, default=None),
    click.option("--seeds", default=None, metavar="A-B",
                 help="Run once per seed A..B, one run directory per seed under --out."),
    click.option("--dataset", default=None),
    click.option("--data-root", default=None),
    click.option("--partition", default=None),
    click.option("--eval-every", type=int, default=None),
    click.option("--transport", type=click.Choice(["zmq", "inproc"]), default=None),
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


def request(kwargs: dict[str, Any]) -> Request:
    keys = ("rounds", "seed", "dataset", "data_root", "partition", "eval_every", "transport")
    if kwargs["seed"] is not None and kwargs["seeds"] is not None:
        raise LaunchError("--seed and --seeds exclude each other")
    return Request(kwargs["topology"], kwargs["protocol"], kwargs["config_file"],
                   {k: kwargs[k] for k in keys}, kwargs["sets"], parse_seeds(kwargs["seeds"]))


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@run_options
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Run directory (default runs/<timestamp>-<protocol>-<topology>).")
@click.pass_context
def cli(ctx: click.Context, **kwargs: Any) -> None:
    """Run a decentralized-learning mesh from a topology file."""
    if ctx.invoked_subcommand is not None:
        return
    sys.exit(launch(request(kwargs), kwargs["out_dir"]))


@cli.command("plan")
@run_options
@click.option("-o", "output", type=click.Path(path_type=Path), required=True)
def plan_cmd(**kwargs: Any) -> None:
    """Write the resolved plan.json without running anything."""
    write_plan_only(request(kwargs), kwargs["output"])


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except LaunchError as exc:
        click.echo(f"dfl-launch: {exc}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"dfl-launch: {exc.format_message()}", err=True)
        sys.exit(2)
    except (KeyboardInterrupt, click.Abort):
        click.echo("dfl-launch: interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
