"""`dfl-launch`: a topology file and a protocol in, a finished run directory out.

Exit codes: 0 success, 1 a failed run, 2 bad input, 130 interrupted. Bad input never reaches a
node: it is one line on stderr, naming the file or option and the reason.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from launcher.config.compose_options import DEFAULT_IMAGE, DEFAULT_SUBNET, ComposeOptions
from launcher.config.options import ViewOptions, command_line_spec, run_options
from launcher.config.run_spec import OPTION_NAMES
from launcher.errors import LaunchError, run_cli
from launcher.slurm.resource_options import COLLECTOR_HOST, RESOURCE_OPTIONS, resources_of

DEFAULT_COLLECT_TIMEOUT_S = 3600.0
# Options that define a run: a resumed run takes them from its directory (inputs.json), so
# --resume refuses each, rather than ignore it. Every run option of the spec is one (derived, so
# a new option cannot be forgotten), but --on-corrupt, which decides only what --resume does.
RUN_DEFINING = ("topology", "protocol", "config_file", "seeds", "sets", "out_dir",
                *sorted(OPTION_NAMES - {"on_corrupt"}))
FLAG_NAMES = {"config_file": "config", "sets": "set", "out_dir": "out"}


class Commands(click.Group):
    """dfl-launch's own sub-commands, then `keys` and those protocols bring, imported when one
    is named or listed. The protocols import torch (seconds), and this module imports nothing
    that does: `dfl-launch slurm --submit` queues its job first, so that the job's hosts warm up
    while this process imports (launcher/slurm/queue.py)."""

    loaded = False

    def load(self) -> None:
        if self.loaded:
            return
        self.loaded = True
        from launcher.config.keys import keys_cmd
        from launcher.plugins_list import plugins_cmd
        from protocols.registry import launch_commands

        for command in [keys_cmd, plugins_cmd, *launch_commands()]:
            self.add_command(command)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is None:
            self.load()
            found = super().get_command(ctx, cmd_name)
        return found

    def list_commands(self, ctx: click.Context) -> list[str]:
        self.load()
        return super().list_commands(ctx)


@click.group(cls=Commands, invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"]})
@run_options
@click.option("--out", "out_dir", type=click.Path(path_type=Path), default=None,
              help="Run directory (default runs/<timestamp>-<protocol>-<topology>); one that "
                   "holds other files than a run of these inputs is refused.")
@click.option("--overwrite", is_flag=True,
              help="Take a --out that holds other files: delete the run files there "
                   "(docs/run-directory.md lists them), keep everything else.")
@click.option("--quiet", is_flag=True,
              help="No live progress and no JSON lines: only the last line on stdout.")
@click.option("--no-plots", is_flag=True, help="Do not write RUN_DIR/plots/*.png.")
@click.option("--resume", "resume_dir", type=click.Path(path_type=Path), default=None,
              metavar="RUN_DIR", help="Continue a stopped or killed run from its checkpoints.")
@click.pass_context
def cli(ctx: click.Context, **kwargs: Any) -> None:
    """Run a decentralized-learning mesh from a topology file."""
    if ctx.invoked_subcommand is not None:
        return
    view = ViewOptions(quiet=kwargs["quiet"], plots=not kwargs["no_plots"])
    if kwargs["resume_dir"] is not None:
        given = [k for k in RUN_DEFINING if kwargs[k] not in (None, ())]
        if given:
            flag = FLAG_NAMES.get(given[0], given[0].replace("_", "-"))
            raise LaunchError(f"--resume: the run directory fixes the inputs; drop --{flag}")
        if kwargs["overwrite"]:
            raise LaunchError("--resume continues a run in its directory; drop --overwrite")
        from launcher.launch import resume
        from launcher.run.resume import slurm_inputs

        # the one run option a resume may change: it decides only what --resume does itself
        on_corrupt = kwargs["on_corrupt"]
        if slurm_inputs(kwargs["resume_dir"]) is not None:
            from launcher.slurm import submit as slurm_submit  # its collector, ZeroMQ and all

            sys.exit(slurm_submit.resume(kwargs["resume_dir"], view, on_corrupt))
        sys.exit(resume(kwargs["resume_dir"], view, on_corrupt))
    from launcher.launch import launch

    sys.exit(launch(command_line_spec(kwargs), kwargs["out_dir"], view, kwargs["overwrite"]))


@cli.command("plan")
@run_options
@click.option("-o", "output", type=click.Path(path_type=Path), required=True)
def plan_cmd(**kwargs: Any) -> None:
    """Write the resolved plan.json without running anything."""
    from launcher.launch import write_plan_only

    write_plan_only(command_line_spec(kwargs), kwargs["output"])


@cli.command("collect")
@click.option("--plan", "plan_path", type=click.Path(path_type=Path), required=True,
              help="The plan the mesh runs (its collector address is where nodes report).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path), required=True,
              help="Run directory to write.")
@click.option("--timeout-s", type=float, default=DEFAULT_COLLECT_TIMEOUT_S, show_default=True,
              help="Give up (exit 1) when the mesh has not finished by then.")
@click.option("--keys", type=click.Path(path_type=Path), default=None, metavar="DIR",
              help="A --secure plan's key files (default: the plan's keys_dir).")
def collect_cmd(plan_path: Path, out_dir: Path, timeout_s: float, keys: Path | None) -> None:
    """Gather the results of a mesh started elsewhere (one dfl-node per host)."""
    from launcher.collect_remote import collect

    sys.exit(collect(plan_path, out_dir, timeout_s, keys))


@cli.command("compose")
@run_options
@click.option("--image", default=DEFAULT_IMAGE, show_default=True,
              help="The node image (docker/Dockerfile).")
@click.option("--subnet", default=DEFAULT_SUBNET, show_default=True,
              help="The mesh network's IPv4 subnet (one no other network on the host uses).")
@click.option("-o", "output", type=click.Path(path_type=Path), required=True, metavar="DIR",
              help="Where the compose file, the plan (DIR/run) and the data (DIR/data) go.")
def compose_cmd(image: str, subnet: str, output: Path, **kwargs: Any) -> None:
    """Write a docker-compose mesh: one container per node, plus the collector."""
    from launcher.backends.compose import write_compose

    path = write_compose(command_line_spec(kwargs), ComposeOptions(output, image, subnet))
    print(f"docker-compose -f {path} up")


def slurm_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """What the job asks Slurm for (launcher/slurm/resource_options.py), then --collector-host."""
    for option in reversed((*RESOURCE_OPTIONS, COLLECTOR_HOST)):
        if option.is_flag:
            func = click.option(option.flag, is_flag=True, default=option.default,
                                help=option.help)(func)
        else:
            func = click.option(option.flag, type=option.kind, default=option.default,
                                show_default=option.default is not None,
                                metavar=option.metavar, help=option.help)(func)
    return func


@cli.command("slurm")
@run_options
@click.option("-o", "output", type=click.Path(path_type=Path), required=True, metavar="DIR",
              help="The run directory: plan.json, job.sh, then the results (on a file system "
                   "the compute nodes share).")
@click.option("--submit", is_flag=True,
              help="Submit the job with sbatch and collect the run here to the end (Ctrl-C "
                   "cancels the job); without it, only write DIR.")
@slurm_options
@click.option("--quiet", is_flag=True, help="With --submit: only the last line on stdout.")
@click.option("--no-plots", is_flag=True, help="With --submit: no RUN_DIR/plots/*.png.")
def slurm_cmd(output: Path, submit: bool, collector_host: str | None, quiet: bool,
              no_plots: bool, **kwargs: Any) -> None:
    """Run the mesh as a Slurm job: one task per node, on whatever hosts Slurm gives."""
    from launcher.slurm.commands import submit_host

    resources = resources_of(kwargs)
    host = collector_host or submit_host()
    req = command_line_spec(kwargs)
    if submit:
        from launcher.slurm.queue import queue

        queued = queue(req, resources, output)  # before the imports below: they take seconds
        try:
            from launcher.slurm.backend import SlurmBackend
            from launcher.slurm.submit import submit as submit_job

            backend = SlurmBackend(resources, host)
        except BaseException:
            from launcher.slurm.commands import cancel

            cancel(queued.job)
            raise
        sys.exit(submit_job(req, backend, queued, ViewOptions(quiet=quiet, plots=not no_plots)))
    from launcher.slurm.backend import SlurmBackend

    backend = SlurmBackend(resources, host)
    try:
        script = backend.hand_off(backend.resolve(req), output)
    finally:
        backend.close()
    print(f"sbatch {script}  # then: dfl-launch collect --plan {script.parent / 'plan.json'} "
          f"--out {script.parent}")


@cli.command("sweep")
@click.argument("sweep_file", type=click.Path(path_type=Path), metavar="SWEEP.yaml")
@click.option("--quiet", is_flag=True, help="No progress bar: each run's last line, then the "
                                            "report.")
@click.option("--no-plots", is_flag=True, help="Do not write each run's plots/*.png.")
def sweep_cmd(sweep_file: Path, quiet: bool, no_plots: bool) -> None:
    """Run a grid of meshes (protocols x topologies x config values x seeds) from one file,
    skipping finished runs and resuming interrupted ones; end with the report of them all."""
    from launcher.sweep.grid import checked
    from launcher.sweep.spec import load_spec

    sweep = checked(load_spec(sweep_file))  # bad input is refused before the runner's imports
    from launcher.sweep.runner import run_sweep

    result = run_sweep(sweep, progress=not quiet, plots=not no_plots)
    sys.exit(result.exit_code)


@cli.command("schema")
@click.option("--protocol", default=None, metavar="NAME",
              help="The run config of this protocol (its hyper section exactly); default: "
                   "one schema that every run config file satisfies.")
@click.option("--topology", "topology_files", is_flag=True,
              help="The schema of topology files instead of run config files.")
def schema_cmd(protocol: str | None, topology_files: bool) -> None:
    """Print the JSON Schema of config files (editors validate against it)."""
    from launcher.config.schema import config_schema

    print(json.dumps(config_schema(protocol, topology_files), indent=2))


def main() -> None:
    run_cli(cli, "dfl-launch", stop_signals_too=True)


if __name__ == "__main__":
    main()
