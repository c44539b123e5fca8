"""Keyword settings of `dfl_mesh.run` as the command line's options, parsed by the same parser.

A setting named like a `dfl-launch` option (`rounds=5`, `data_root=...`, `on_failure=...`) is
that option; any other keyword is a config key (`lr=0.05`, a top-level key or a protocol
hyper-parameter), exactly as `--set key=value` is. Values travel as JSON, which YAML reads
unchanged, so `model={"name": "mlp"}` reaches the config as the mapping it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from launcher.config.options import Request, request, run_options
from launcher.errors import LaunchError


def _parser() -> click.Command:
    @click.command("dfl_mesh.run")
    @run_options
    def command(**kwargs: Any) -> None:
        """Never invoked: the command exists for its parser."""

    return command


PARSER = _parser()
OPTION_NAMES = {p.name: p for p in PARSER.params if isinstance(p, click.Option) and p.name}
OPTION_FLAGS = {name: max(p.opts, key=len) for name, p in OPTION_NAMES.items()}
NOT_SETTINGS = {"topology", "protocol", "config_file", "sets"}


def to_argv(topology: str | Path, protocol: str, config: str | Path | None,
            settings: Mapping[str, Any], overrides: Mapping[str, Any]) -> list[str]:
    """The `dfl-launch` arguments these settings stand for."""
    argv = ["--topology", str(topology), "--protocol", protocol]
    if config is not None:
        argv += ["--config", str(config)]
    sets: dict[str, Any] = {}
    for name, value in settings.items():
        if name in NOT_SETTINGS:
            raise LaunchError(f"{name}=: pass it as run()'s own argument")
        if value is None:
            continue
        if name not in OPTION_NAMES:
            sets[name] = value
        elif OPTION_NAMES[name].is_flag:
            argv += [OPTION_FLAGS[name]] if value else []
        else:
            argv += [OPTION_FLAGS[name], str(value)]
    for key, value in {**sets, **overrides}.items():
        argv += ["--set", f"{key}={json.dumps(value)}"]
    return argv


def parse(argv: list[str]) -> Request:
    """The request `dfl-launch ARGV` makes; a LaunchError (one line) where the CLI exits 2."""
    try:
        with PARSER.make_context(PARSER.name, list(argv)) as ctx:
            return request(ctx.params)
    except click.ClickException as exc:
        raise LaunchError(exc.format_message()) from None
