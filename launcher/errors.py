"""User errors: one line on stderr, exit code 2, before anything starts."""

from __future__ import annotations

import contextlib
import signal
import sys

import click

from dfl_config.errors import DflMeshError
from launcher import stop_signals
from launcher.logs import configure, launcher_logger

LOG = launcher_logger("cli")


class LaunchError(DflMeshError):
    pass


def run_cli(cli: click.Command, prog: str, info_on_stdout: bool = False,
            stop_signals_too: bool = False) -> None:
    """Run a click CLI under the project's exit codes: a user error (ours or click's) is one
    `prog: reason` line on stderr and exit 2; an interrupt is exit 130. Ctrl-C must reach us
    even when a parent started us with SIGINT ignored (Python then keeps it ignored); with
    `stop_signals_too`, SIGTERM and SIGHUP stop the program as Ctrl-C does, with their own
    exit codes (launcher/stop_signals.py). The program's warnings, these lines included, go to
    stderr under `prog`; INFO lines only with `info_on_stdout`, for a program whose stdout is
    a log, not data (launcher/logs.py)."""
    configure(prog, info_on_stdout)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with stop_signals.installed() if stop_signals_too else contextlib.nullcontext():
            cli.main(standalone_mode=False)
    except LaunchError as exc:
        LOG.error("%s", exc)
        sys.exit(2)
    except click.ClickException as exc:
        LOG.error("%s", exc.format_message())
        sys.exit(2)
    except (KeyboardInterrupt, click.Abort) as exc:
        signum = stop_signals.signal_of(exc) if isinstance(exc, KeyboardInterrupt) \
            else signal.SIGINT
        LOG.error("%s", stop_signals.describe(signum))
        sys.exit(stop_signals.exit_code(signum))
