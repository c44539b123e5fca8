"""`dfl-launch`: a topology file and a protocol in, a finished run directory out.

Exit codes: 0 success, 1 a failed run, 2 bad input, 130 interrupted. Bad input never reaches a
node: it is one line on stderr, naming the file or option and the reason.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from launcher.collect import collect
from launcher.errors import LaunchError
from launcher.jstar import jstar_cmd
from launcher.options import request, run_options
from launcher.run import launch, write_plan_only

DEFAULT_COLLECT_TIMEOUT_S = 3600.0


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


@cli.command("collect")
@click.option("--plan", "plan_path", type=click.Path(path_type=Path), required=True,
              help="The plan the mesh runs (its collector address is where nodes report).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), required=True,
              help="Run directory to write.")
@click.option("--timeout-s", type=float, default=DEFAULT_COLLECT_TIMEOUT_S, show_default=True,
              help="Give up (exit 1) when the mesh has not finished by then.")
def collect_cmd(plan_path: Path, out_dir: Path, timeout_s: float) -> None:
    """Gather the results of a mesh started elsewhere (one dfl-node per host)."""
    sys.exit(collect(plan_path, out_dir, timeout_s))


cli.add_command(jstar_cmd)


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
