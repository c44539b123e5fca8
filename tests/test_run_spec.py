"""One typed request: `dfl-launch` options and `dfl_mesh.run` keywords make the same RunSpec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from launcher.api.settings import keyword_spec
from launcher.cli import cli
from launcher.config.options import command_line, command_line_spec
from launcher.config.run_spec import RunSpec
from launcher.errors import LaunchError

ROOT = Path(__file__).resolve().parents[1]


def from_cli(*argv: str) -> RunSpec:
    """The spec `dfl-launch ARGV` runs, from the very parser the command line has."""
    with cli.make_context("dfl-launch", list(argv)) as ctx:
        return command_line_spec(ctx.params)


def same_run(tmp_path: Path) -> list[tuple[list[str], tuple[Any, ...], dict[str, Any]]]:
    """(command line, run()'s positional arguments and keywords) for the same run, each."""
    config = tmp_path / "paper.yaml"
    config.write_text("rounds: 7\nhyper: {lr: 0.01}\n")
    keys = tmp_path / "keys"
    return [
        (["--topology", "ring20", "--protocol", "d-psgd", "--config", str(config)],
         ("ring20", "d-psgd"), {"config": config}),
        (["--topology", "ring20", "--protocol", "dmfl-sq", "--set", "lr=0.05",
          "--set", "model={name: mlp, hidden: [8, 4]}", "--set", "trigger=constant",
          "--set", "eval_at_start=true", "--set", "accounting.b_hdr=32",
          "--set", "theta0=3"],
         ("ring20", "dmfl-sq"),
         {"lr": 0.05, "model": {"name": "mlp", "hidden": [8, 4]}, "trigger": "constant",
          "eval_at_start": True, "overrides": {"accounting.b_hdr": 32, "theta0": 3}}),
        (["--topology", str(ROOT / "topologies" / "ring20.yaml"), "--protocol", "qffl",
          "--rounds", "3", "--seed", "4", "--dataset", "synthetic", "--data-root",
          str(tmp_path), "--partition", "shards:2", "--eval-every", "2", "--transport", "zmq",
          "--checkpoint-every", "0", "--on-corrupt", "stop", "--secure", "--keys", str(keys),
          "--deadline", "5", "--on-failure", "continue", "--set", "lr=0.1"],
         (ROOT / "topologies" / "ring20.yaml", "qffl"),
         {"rounds": 3, "seed": 4, "dataset": "synthetic", "data_root": tmp_path,
          "partition": "shards:2", "eval_every": 2, "transport": "zmq", "checkpoint_every": 0,
          "on_corrupt": "stop", "secure": True, "keys": keys, "deadline": 5,
          "on_failure": "continue", "lr": 0.1}),
    ]


def api_spec(args: tuple[Any, ...], keywords: dict[str, Any]) -> RunSpec:
    """The spec `dfl_mesh.run(*args, **keywords)` runs."""
    settings = dict(keywords)
    config, overrides = settings.pop("config", None), settings.pop("overrides", {})
    topology, protocol = args
    return keyword_spec(topology, protocol, config, settings, overrides)


def test_the_command_line_and_the_api_make_equal_specs(tmp_path: Path) -> None:
    for argv, args, keywords in same_run(tmp_path):
        spec = from_cli(*argv)
        assert api_spec(args, keywords) == spec, argv
        # the record a resume reads back, and the command line a subprocess runs, are the run
        assert RunSpec.from_record(json.loads(json.dumps(spec.recorded()))) == spec
        assert from_cli(*command_line(api_spec(args, keywords))) == spec
    other = api_spec(("ring20", "dmfl-sq"), {"lr": 0.5})
    assert other != from_cli("--topology", "ring20", "--protocol", "dmfl-sq", "--set", "lr=0.05")


def test_a_setting_keeps_the_text_the_command_line_was_given() -> None:
    """inputs.json says `lr=5e-2` as typed (a rerun compares it), `lr=0.05` from Python."""
    typed = from_cli("--topology", "ring20", "--protocol", "d-psgd", "--set", "lr=5e-2",
                     "--set", "model={name: mlp}")
    given = api_spec(("ring20", "d-psgd"), {"lr": 0.05, "model": {"name": "mlp"}})
    assert typed.recorded()["sets"] == ["lr=5e-2", "model={name: mlp}"]
    assert given.recorded()["sets"] == ["lr=0.05", 'model={"name": "mlp"}']


def test_a_wrong_keyword_is_one_line_naming_it() -> None:
    with pytest.raises(LaunchError, match=r"^eval_every='often': .*valid integer"):
        api_spec(("ring20", "d-psgd"), {"eval_every": "often"})
    with pytest.raises(LaunchError, match=r"^lr=: object is no config value"):
        api_spec(("ring20", "d-psgd"), {"lr": object()})
    with pytest.raises(LaunchError, match="--seed and --seeds exclude each other"):
        from_cli("--topology", "ring20", "--protocol", "d-psgd", "--seed", "1", "--seeds", "0-2")


def test_no_argv_is_built_in_the_api() -> None:
    """`dfl_mesh.run` builds its spec from Python values, never from command-line words."""
    for path in sorted((ROOT / "launcher" / "api").glob("*.py")):
        text = path.read_text()
        assert "argv" not in text and "make_context" not in text, path
