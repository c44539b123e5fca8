"""User errors: one line on stderr, exit code 2, before anything starts."""

from __future__ import annotations

import signal
import sys

import click


class LaunchError(Exception):
    pass


def run_cli(cli: click.Command, prog: str) -> None:
    """Run a click CLI under the project's exit codes: a user error (ours or click's) is one
    `prog: reason` line on stderr and exit 2; an interrupt is exit 130. Ctrl-C must reach us
    even when a parent started us with SIGINT ignored (Python then keeps it ignored)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        cli.main(standalone_mode=False)
    except LaunchError as exc:
        click.echo(f"{prog}: {exc}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"{prog}: {exc.format_message()}", err=True)
        sys.exit(2)
    except (KeyboardInterrupt, click.Abort):
        click.echo(f"{prog}: interrupted", err=True)
        sys.exit(130)
