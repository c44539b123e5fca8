"""The reproduction scripts (bench/reproduce_*.py) as sweeps: their options become a sweep whose
every run resolves (checked as `dfl-launch sweep` checks a grid, without running a mesh), seeds
are read by the launcher's one parser, and a script run twice runs nothing the second time."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from bench import reproduce_dmflsq, reproduce_dsc, reproduce_ssdfl, sweeps
from launcher.sweep.grid import check, points

ROOT = Path(__file__).resolve().parents[1]


def test_seed_ranges_are_read_by_the_launchers_parser() -> None:
    assert sweeps.seed_range("1-3") == [1, 2, 3]
    assert sweeps.seed_range("4") == [4]
    with pytest.raises(argparse.ArgumentTypeError, match="expected"):
        sweeps.seed_range("3-1")


def test_one_seed_range_parser_and_no_subprocess_loop_in_bench() -> None:
    """Issue 26: the scripts drive sweeps; `A-B` is split in launcher/config/options.py only."""
    needle = "partition(" + '"-")'  # spelled apart, or this file would hold it
    packages = ("dfl_config", "topologies", "dfl_node", "protocols", "launcher", "dfl_mesh",
                "bench", "tests")
    splitters = [p for package in packages for p in sorted((ROOT / package).rglob("*.py"))
                 if needle in p.read_text()]
    assert [p.relative_to(ROOT).as_posix() for p in splitters] == ["launcher/config/options.py"]
    for script in ("reproduce_dmflsq", "reproduce_ssdfl", "reproduce_dsc"):
        assert "subprocess" not in (ROOT / "bench" / f"{script}.py").read_text()


def test_dmflsq_options_cut_the_shipped_sweep(tmp_path: Path) -> None:
    opts = reproduce_dmflsq.parse(["--rounds", "3", "--seeds", "1-2", "--out", str(tmp_path),
                                   "--only", "DMFL-SQ,No fairness (rho=0),d-psgd"])
    spec = reproduce_dmflsq.sweep_spec(opts.methods, opts)
    assert [v.name for v in spec.variants] == ["d-psgd", "dmfl-sq", "no-fairness-rho-0"]
    assert spec.settings["rounds"] == 3 and spec.seeds == [1, 2] and spec.out == tmp_path
    grid = points(spec)
    assert check(grid) == 20
    assert grid[0].run_dir == tmp_path / "d-psgd" / "ring20" / "defaults" / "seed-1"
    assert "rho=0" in grid[-1].request.sets


def test_every_dmflsq_variant_is_a_method_of_the_script(tmp_path: Path) -> None:
    opts = reproduce_dmflsq.parse(["--seeds", "1-1", "--out", str(tmp_path)])
    spec = reproduce_dmflsq.sweep_spec(opts.methods, opts)
    methods = reproduce_dmflsq.METHODS + reproduce_dmflsq.ABLATIONS
    assert [v.name for v in spec.variants] == [m.variant for m in methods]
    assert all(reproduce_dmflsq.slug(m.label) == m.variant for m in methods)
    check(points(spec))
    with pytest.raises(SystemExit):
        reproduce_dmflsq.parse(["--only", "no-such-method"])


def test_ssdfl_is_a_variant_per_method_and_level(tmp_path: Path) -> None:
    opts = reproduce_ssdfl.parse(["--seeds", "1-1", "--out", str(tmp_path)])
    spec = reproduce_ssdfl.sweep_spec(opts)
    assert len(spec.variants) == 10 and len(spec.topologies) == 6
    grid = points(spec)
    assert check(grid) == 30
    assert grid[0].run_dir == tmp_path / "ssd-fl-mild" / "er10" / "defaults" / "seed-1"
    assert "partition" in grid[0].request.options and \
        grid[0].request.options["partition"] == "shards:3"


def test_dsc_depths_and_baseline(tmp_path: Path) -> None:
    assert reproduce_dsc.depth_list("1-3,5,8") == [1, 2, 3, 5, 8]
    with pytest.raises(argparse.ArgumentTypeError):
        reproduce_dsc.depth_list("0,x")
    opts = reproduce_dsc.parse(["--tiny", "--seeds", "0-1", "--out", str(tmp_path)])
    assert opts.seeds == [0, 1]
    base = tmp_path / "dsc-noagg" / "rgg10" / "defaults" / "seed-0"
    spec = reproduce_dsc.sweep_spec(opts, [reproduce_dsc.variant("dsc-fedavg", 5)], [0], base)
    (point,) = points(spec)
    assert check([point]) == 10
    assert point.run_dir == tmp_path / "dsc-fedavg-J5" / "rgg10" / "defaults" / "seed-0"
    assert f'hyper.delta_baseline="{base}"' in point.request.sets
    assert "hyper.depth=5" in point.request.sets
    paper_sized = reproduce_dsc.sweep_spec(reproduce_dsc.parse(["--out", str(tmp_path)]),
                                           [reproduce_dsc.variant("dsc", 1)], [0])
    assert paper_sized.settings["scenes"] == {"test_size": 650}  # dsc-paper.yaml's pool


@pytest.mark.slow
def test_ssdfl_at_a_tiny_budget_then_again_runs_nothing(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--cycles", "1", "--local-steps", "1", "--eval-size", "50", "--seeds", "1-1",
            "--graphs", "er10", "--levels", "mild", "--only", "ssd-fl,sdfl",
            "--out", str(tmp_path)]
    assert reproduce_ssdfl.main(argv) == 0
    first = capsys.readouterr()
    assert "2 runs, 0 of them finished before" in first.err
    assert re.search(r"er10/mild: SSD-FL .* >= sdfl", first.out)
    assert reproduce_ssdfl.main(argv) == 0
    again = capsys.readouterr()
    assert "2 runs, 2 of them finished before" in again.err
    assert "run_dir:" not in again.out
    assert (tmp_path / "table.json").is_file()
