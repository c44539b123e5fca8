"""`dfl-report`: seeds grouped, the papers' columns as mean +- a 95% t-interval (checked against
scipy on real runs), family tables apart, curves, csv/json, user errors."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as scipy_stats

from launcher.errors import LaunchError
from launcher.results.report import build_report, report_of
from launcher.results.report_groups import table_groups
from launcher.results.report_plots import aligned, kinds
from launcher.results.report_runs import Run
from launcher.results.report_text import to_markdown
from launcher.results.stats import mean_ci, t975
from tests.harness import ENV_ROOT, ROOT, Exited

HEX4 = "nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}]\nedges: [[0, 1], [1, 2], [2, 3], [3, 0]]\n"
PROTOCOLS = ("d-psgd", "dmfl-sq")
TABLE_II = ("avg_accuracy", "worst_accuracy", "bottom10_accuracy", "std_accuracy", "jain_index",
            "bits_per_client")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Seeds 0-2 of two protocols, real meshes on a 4-ring, each client evaluated on its own
    split (Table II's setting): OUT/<protocol>/seed-<s>/."""
    where = tmp_path_factory.mktemp("report")
    (where / "hex4.yaml").write_text(HEX4)
    procs = [subprocess.Popen(
        [sys.executable, "-m", "launcher.cli", "--topology", str(where / "hex4.yaml"),
         "--protocol", protocol, "--out", str(where / protocol), "--seeds", "0-2",
         "--rounds", "2", "--eval-every", "1", "--transport", "inproc", "--dataset",
         "synthetic", "--set", "eval_split=local", "--no-plots"], cwd=ROOT, env=ENV_ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for protocol in PROTOCOLS]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
    return where


def report(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "launcher.report_cli", *map(str, args)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=ENV_ROOT)


def summaries(runs: Path, protocol: str) -> list[dict[str, Any]]:
    return [json.loads((runs / protocol / f"seed-{s}" / "summary.json").read_text())
            for s in range(3)]


def by_hand(values: list[float]) -> tuple[float, float]:
    """Mean and 95% half-width with scipy's t quantile, 2 degrees of freedom."""
    return (float(np.mean(values)),
            float(scipy_stats.t.ppf(0.975, 2) * np.std(values, ddof=1) / math.sqrt(3)))


def test_table_ii_cells_are_the_t_interval_over_three_seeds(runs: Path) -> None:
    proc = report(runs / "d-psgd", runs / "dmfl-sq", "--format", "json")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    (table,) = json.loads(proc.stdout)["tables"]
    assert (table["family"], table["eval_split"]) == ("dmfl-sq", "local")
    assert [c["key"] for c in table["columns"]] == list(TABLE_II)
    assert [g["label"] for g in table["groups"]] == ["dmfl-sq", "d-psgd"]
    for group in table["groups"]:
        assert group["seeds"] == [0, 1, 2]
        runs_summaries = summaries(runs, group["protocol"])
        for key in TABLE_II:
            mean, half = by_hand([float(s[key]) for s in runs_summaries])
            cell = group["cells"][key]
            assert cell["mean"] == pytest.approx(mean, rel=1e-12)
            assert cell["ci95"] == pytest.approx(half, rel=1e-12, abs=1e-12)
            assert (cell["n"], cell["total"]) == (3, 3)


def test_markdown_prints_mean_and_half_width(runs: Path) -> None:
    proc = report(runs)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("| d-psgd |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    s = summaries(runs, "d-psgd")
    acc, jain = (by_hand([x[k] for x in s]) for k in ("avg_accuracy", "jain_index"))
    assert cells[:3] == ["d-psgd", "0, 1, 2", f"{acc[0]:.4f} ± {acc[1]:.4f}"]
    assert cells[6] == f"{jain[0]:.4f} ± {jain[1]:.4f}"
    bits = s[0]["bits_per_client"]  # dense d-psgd: the same every seed, so the interval is 0
    assert bits > 1e3 and cells[7] == f"{bits / 1e3:.2f}k ± 0.00k"


def test_csv_holds_the_same_numbers_as_json(runs: Path) -> None:
    rows = list(csv.DictReader(io.StringIO(report(runs, "--format", "csv").stdout)))
    cells = {(g["label"], k): c for t in json.loads(report(runs, "--format", "json").stdout)
             ["tables"] for g in t["groups"] for k, c in g["cells"].items()}
    assert len(rows) == len(cells) == 2 * len(TABLE_II)
    for row in rows:
        cell = cells[(row["group"], row["metric"])]
        assert float(row["mean"]) == cell["mean"] and row["seeds"] == "0 1 2"


def test_accuracy_curve_is_the_mean_over_nodes_and_seeds(runs: Path) -> None:
    (table,) = build_report([runs]).tables
    row = next(r for r in table.rows if r.group.protocol == "d-psgd")
    kind = next(k for k in kinds(table) if k.name == "accuracy-vs-round")
    x, y = aligned(row.group, kind)
    per_seed = np.zeros((3, 2))  # seed, round: mean accuracy over the 4 nodes
    for s in range(3):
        lines = (runs / "d-psgd" / f"seed-{s}" / "metrics.jsonl").read_text().splitlines()
        for rec in map(json.loads, lines):
            per_seed[s, rec["round"] - 1] += rec["accuracy"] / 4
    assert list(x) == [1, 2]
    assert y == pytest.approx(per_seed, rel=1e-12)
    assert [k.name for k in kinds(table)] == ["accuracy-vs-round", "worst-vs-round",
                                              "accuracy-vs-bits"]


def test_plots_and_failed_runs(runs: Path, tmp_path: Path) -> None:
    failed = tmp_path / "failed"
    shutil.copytree(runs / "d-psgd" / "seed-0", failed)
    summary = json.loads((failed / "summary.json").read_text())
    (failed / "summary.json").write_text(json.dumps({**summary, "status": "failed"}))
    proc = report(runs, failed, "--plots", tmp_path / "plots")
    assert proc.returncode == 0
    assert proc.stderr == f"dfl-report: skipped (status failed): {failed}\n"
    names = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert names == [f"dmfl-sq-local-{k}.png" for k in
                     ("accuracy-vs-bits", "accuracy-vs-round", "worst-vs-round")]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in (tmp_path / "plots").iterdir())


def fake(path: str, protocol: str, seed: int, hyper: dict[str, Any] | None = None,
         split: str = "local", data_root: str = "/data", **summary: Any) -> Run:
    """A run as read from disk (config and summary only), for grouping rules."""
    config = {"protocol": protocol, "seed": seed, "data_root": data_root, "eval_split": split,
              "hyper": {"lr": 0.1, **(hyper or {})}}
    return Run(Path(path), config, {"protocol": protocol, "seed": seed, "rounds": 1,
                                    "eval_split": split, **summary}, [])


def test_groups_are_configs_less_seed_and_tables_are_family_and_split() -> None:
    runs = [fake("a0", "d-psgd", 0), fake("a1", "d-psgd", 1, data_root="/elsewhere"),
            fake("b0", "d-psgd", 0, {"lr": 0.05}), fake("c0", "choco-sgd", 0),
            fake("g0", "d-psgd", 0, split="global"), fake("s0", "ssd-fl", 0)]
    tables = table_groups(runs)
    assert [(t.family, t.eval_split) for t in tables] == [
        ("dmfl-sq", "global"), ("dmfl-sq", "local"), ("ssd-fl", "local")]
    local = tables[1].groups
    assert [(g.label, [str(r.path) for r in g.runs]) for g in local] == [
        ("choco-sgd", ["c0"]), ("d-psgd lr=0.05", ["b0"]), ("d-psgd lr=0.1", ["a0", "a1"])]
    with pytest.raises(LaunchError, match="a0 and a2: the same configuration and seed 0"):
        table_groups([*runs, fake("a2", "d-psgd", 0)])


def test_labels_name_only_departures_from_the_usual_setting() -> None:
    runs = [fake(f"{name}{s}", "dmfl-sq", s, hyper) for s in (0, 1)
            for name, hyper in (("full", {}), ("rho", {"rho": 0}), ("alpha", {"alpha": 0}))]
    runs = [Run(r.path, {**r.config, "hyper": {"rho": 0.5, "alpha": 0.4, **r.config["hyper"]}},
                r.summary, []) for r in runs]
    (table,) = table_groups(runs)
    assert [g.label for g in table.groups] == ["dmfl-sq", "dmfl-sq alpha=0", "dmfl-sq rho=0"]


def test_cycles_to_threshold_and_dsc_deltas() -> None:
    ssd = [fake(f"s{s}", "ssd-fl", s, avg_accuracy=0.5 + s / 10,
                cycles_to_threshold={"0.6": c, "0.9": None}) for s, c in enumerate((4, 6, None))]
    dsc = [fake(f"d{s}", "dsc", s, delta_all=d, delta_tasks={"seg": d + 1, "sn": d - 1})
           for s, d in enumerate((2.0, 3.0, 7.0))]
    text = to_markdown(report_of(ssd + dsc))
    rows = [line for line in text.splitlines() if line.startswith("| ssd-fl") or
            line.startswith("| dsc")]
    acc = mean_ci([0.5, 0.6, 0.7])
    five = mean_ci([4.0, 6.0])
    assert rows[0] == (f"| ssd-fl | 0, 1, 2 | {acc[0]:.4f} ± {acc[1]:.4f} | "
                       f"{five[0]:.1f} ± {five[1]:.1f} (2/3) | never |")
    delta = mean_ci([2.0, 3.0, 7.0])
    seg = mean_ci([3.0, 4.0, 8.0])
    assert rows[1].startswith(f"| dsc | 0, 1, 2 | {seg[0]:.2f} ± {seg[1]:.2f} | ")
    assert rows[1].endswith(f" | {delta[0]:.2f} ± {delta[1]:.2f} |")


def test_a_table_with_adversaries_gets_the_honest_columns() -> None:
    """Over seeds like every column; a run without adversaries shows its all-client figures
    there (all its clients are honest), and a backdoor's rate only where one was measured."""
    attacked = [fake(f"a{s}", "d-psgd", s, {"aggregation": "mean"}, avg_accuracy=0.5,
                     adversaries={"3": [{"kind": "backdoor"}]},
                     honest={"avg_accuracy": 0.6 + s / 100, "worst_accuracy": 0.5 + s / 50,
                             "consensus_distance": 1.0 + s, "backdoor_asr": 0.2 * s})
                for s in range(3)]
    clean = [fake(f"c{s}", "d-psgd", s, avg_accuracy=0.7 + s / 100, worst_accuracy=0.6,
                  consensus_gap=0.5) for s in range(3)]
    (table,) = report_of(attacked + clean).tables
    keys = [c.key for c in table.columns]
    assert keys == [*TABLE_II, "honest_avg_accuracy", "honest_worst_accuracy",
                    "honest_consensus_distance", "backdoor_asr"]
    rows = {row.group.runs[0].path.name[0]: row.cells for row in table.rows}
    for key, values in (("honest_avg_accuracy", [0.6, 0.61, 0.62]),
                        ("honest_worst_accuracy", [0.5, 0.52, 0.54]),
                        ("honest_consensus_distance", [1.0, 2.0, 3.0]),
                        ("backdoor_asr", [0.0, 0.2, 0.4])):
        assert (rows["a"][key].mean, rows["a"][key].half) == pytest.approx(mean_ci(values))
    assert rows["c"]["honest_avg_accuracy"].mean == pytest.approx(0.71)
    assert rows["c"]["honest_worst_accuracy"].mean == pytest.approx(0.6)
    assert rows["c"]["honest_consensus_distance"].mean == pytest.approx(0.5)
    assert rows["c"]["backdoor_asr"].n == 0
    assert "| Honest avg acc | Honest worst acc | Honest consensus dist | Backdoor ASR |" in \
        to_markdown(report_of(attacked))
    assert "Honest" not in to_markdown(report_of(clean))


def test_t_quantile_matches_its_closed_forms() -> None:
    """scipy's quantile against the few degrees of freedom with a closed form, and the normal
    limit (an independent oracle, now that the code itself asks scipy)."""
    p, alpha = 0.975, 4 * 0.975 * 0.025
    q4 = math.cos(math.acos(math.sqrt(alpha)) / 3) / math.sqrt(alpha)
    assert t975(1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-12)
    assert t975(2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-12)
    assert t975(4) == pytest.approx(2 * math.sqrt(q4 - 1), rel=1e-12)
    assert t975(10**9) == pytest.approx(statistics.NormalDist().inv_cdf(p), rel=1e-8)


@pytest.mark.parametrize(("make", "needle"), [
    (lambda d: d / "nope", "nope: no such directory"),
    (lambda d: d, "no summary.json in it or below"),
])
def test_user_errors_are_one_line_and_exit_2(tmp_path: Path, entry: Callable[..., Exited],
                                            make: Any, needle: str) -> None:
    done = entry("dfl-report", str(make(tmp_path)))
    assert done.code == 2 and done.out == ""
    assert done.err.count("\n") == 1 and needle in done.err


def test_a_broken_summary_is_named(runs: Path, tmp_path: Path,
                                   entry: Callable[..., Exited]) -> None:
    broken = tmp_path / "run"
    shutil.copytree(runs / "d-psgd" / "seed-1", broken)
    (broken / "summary.json").write_text("{not json")
    done = entry("dfl-report", str(broken))
    assert done.code == 2 and done.out == ""
    assert done.err.startswith(f"dfl-report: {broken / 'summary.json'}: unreadable (")
