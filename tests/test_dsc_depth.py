"""The optimal depth J* (paper Eq. 40-41, the integer rule) and the sweep fit
(docs/protocols/dsc.md#a14)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from protocols.dsc.depth import bound, continuous_depth, deployed_depth, fit_constants
from tests.harness import ENV_ROOT, ROOT


@pytest.mark.parametrize(("a", "ab", "rho", "star", "deployed"), [
    (0.5, 1, 0.8, 2.7515, 3),
    (0.25, 1, 0.6262, 0.7404, 1),
    (0.25, 1, 0.9818, 18.869, 15),
    (0.79679, 1, 0.8, 5.0001, 5),
    (1.2, 1, 0.8, math.inf, 15),
])
def test_the_spec_table(a: float, ab: float, rho: float, star: float, deployed: int) -> None:
    assert continuous_depth(a, ab, rho) == pytest.approx(star, abs=1e-3)
    assert deployed_depth(a, ab, rho, 15) == deployed


def test_bound_values_decide_between_floor_and_ceil() -> None:
    assert bound(2, 0.5, 1, 0.8) == pytest.approx(1.4373, abs=1e-4)
    assert bound(3, 0.5, 1, 0.8) == pytest.approx(1.4155, abs=1e-4)


def test_fit_recovers_the_constants_of_a_u_shaped_sweep() -> None:
    depths = [1, 2, 3, 5, 8, 12, 15]
    errors = [0.3 + bound(j, 0.5, 1.0, 0.8) for j in depths]
    fit = fit_constants(depths, errors, 0.8)
    assert (fit.c0, fit.a, fit.ab) == pytest.approx((0.3, 0.5, 1.0), abs=1e-9)
    flat = fit_constants(depths, [1.0 - 0.01 * j for j in depths], 0.8)  # no U: alpha B = 0
    assert flat.ab == 0.0 and flat.a >= 0.0


@pytest.mark.parametrize(("args", "needle"), [
    ([], "give --rho, --run or --sweep"),
    (["--rho", "1.5", "--A", "1", "--aB", "2"], "rho must be in (0, 1)"),
    (["--rho", "0.8"], "give --A and --aB"),
])
def test_jstar_command_bad_input_is_one_line_exit_2(args: list[str], needle: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "launcher.cli", "jstar", *args], env=ENV_ROOT,
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and needle in proc.stderr


def test_jstar_command_prints_the_depth() -> None:
    proc = subprocess.run([sys.executable, "-m", "launcher.cli", "jstar", "--rho", "0.8",
                           "--A", "0.79679", "--aB", "1"], env=ENV_ROOT, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    out = json.loads(proc.stdout)
    assert out["j_star"] == pytest.approx(5.0001, abs=1e-3) and out["j_deployed"] == 5
    assert out["bound"][4] == [5, pytest.approx(bound(5, 0.79679, 1, 0.8))]


def test_jstar_command_fits_a_sweep_of_run_directories(tmp_path: Path) -> None:
    """-Delta_all(J) = c0 + Bound(J) with known constants: the command recovers them. The run
    at the default J = 5 has no depth in its config."""
    dirs = []
    for j in (1, 2, 3, 5, 8, 12, 15):
        run = tmp_path / f"J{j}"
        run.mkdir()
        summary = {"config": {"hyper": {"depth": j} if j != 5 else {}}, "rho_mean": 0.8,
                   "delta_all": -(bound(j, 0.79679, 1.0, 0.8) - 3.0)}
        (run / "summary.json").write_text(json.dumps(summary))
        dirs += ["--sweep", str(run)]
    proc = subprocess.run([sys.executable, "-m", "launcher.cli", "jstar", *dirs], env=ENV_ROOT,
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    out = json.loads(proc.stdout)
    assert out["fit"]["A"] == pytest.approx(0.79679, abs=1e-6)
    assert out["fit"]["aB"] == pytest.approx(1.0, abs=1e-6)
    assert out["j_deployed"] == 5 and out["fit"]["measured_best_j"] == 5
