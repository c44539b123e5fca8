"""MkDocs hook: the CLI reference's option tables say what `--help` says.

mkdocs-click 0.9 writes an option's `default` attribute as it finds it, so under click >= 8.3 an
option without a default reads `Sentinel.UNSET`, and it pastes the help text in as Markdown, so a
placeholder such as `runs/<timestamp>-...` vanishes as an unknown HTML tag. This hook replaces the
row formatter with one that shows click's own default (none, or "required") and escapes the help.
It fails the build if mkdocs-click no longer has the formatter, rather than render wrong tables.
It also loads dfl-launch's on-demand sub-commands, so that the reference lists them.
"""

from __future__ import annotations

import html
from typing import Any

import click
from mkdocs_click import _docs

_PIPE = "&#x7C;"


def _default(option: click.Option) -> str:
    if option.required:
        return "required"
    value = option.default
    if repr(value).endswith("UNSET") or value in (None, ()) or (option.is_flag and not value):
        return ""
    return f"`{value}`"


def _row(option: click.Option) -> str:
    names = ", ".join(f"`{opt}`" for opt in option.opts)
    if option.secondary_opts:
        names += " / " + ", ".join(f"`{opt}`" for opt in option.secondary_opts)
    kind = _docs._format_table_option_type(option)
    text = html.escape(option.help or "", quote=False).replace("|", _PIPE)
    text = " ".join(text.split())
    return f"| {names} | {kind} | {text} | {_default(option)} |"


def on_config(config: Any) -> Any:
    if not callable(getattr(_docs, "_format_table_option_row", None)):
        raise RuntimeError("mkdocs-click changed: docs/hooks/cli_tables.py needs updating")
    _docs._format_table_option_row = _row
    # dfl-launch loads the sub-commands protocols bring (and `keys`) only when one is named or
    # listed (launcher/cli.py), and mkdocs-click reads a group's registered commands: list them
    # once, so that the reference has them all.
    from launcher.cli import cli

    cli.list_commands(click.Context(cli))
    return config
