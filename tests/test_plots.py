"""RUN_DIR/plots/*.png: every figure is labelled, legible and shows the run's own numbers."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.image import imread

from launcher.config.run_spec import RunSpec
from launcher.launch import write_plan_only
from launcher.logs import configure
from launcher.results.plots import figures, plot_run, write_plots
from launcher.results.plots_curves import ADVERSARY_COLOUR, ADVERSARY_MARKER
from launcher.results.plots_data import RunFiles, load_run
from tests.harness import launch_ok
from tests.rings import ring_file

UNIT = re.compile(r"\S.*\(.+\)$")  # "virtual time (s)"
SYNTHETIC = ("--transport", "inproc", "--dataset", "synthetic", "--partition", "iid")
DSC_TINY = ("--transport", "inproc", "--rounds", "2", "--eval-every", "1",
            "--set", "scenes={size: 16, train_size: 60, test_size: 16, min_size: 12}",
            "--set", "hyper.depth=2", "--set", "hyper.epochs=1",
            "--set", "tdma.interference_range=1")
SPEC4 = """\
nodes:
  - {id: 0, position: [0.0, 0.0], tasks: [seg, sn, dep]}
  - {id: 1, position: [1.0, 0.0], tasks: [seg, dep]}
  - {id: 2, position: [1.0, 1.0], tasks: [sn, dep]}
  - {id: 3, position: [2.0, 1.0], tasks: [seg]}
edges: [[0, 1], [1, 2], [2, 3], [0, 2]]
"""


def is_colorbar(ax: Axes) -> bool:
    return hasattr(ax, "_colorbar")


def series(ax: Axes) -> int:
    return len(ax.lines) + len(ax.collections) + len(ax.containers)


def check_figure(name: str, fig: Figure) -> None:
    """A title, axis labels with units, a legend when more than one series is drawn."""
    assert fig.get_suptitle(), name
    for ax in fig.axes:
        if is_colorbar(ax):
            assert UNIT.match(ax.get_ylabel()), (name, ax.get_ylabel())
            continue
        assert ax.get_title(), name
        for label in (ax.get_xlabel(), ax.get_ylabel()):
            assert UNIT.match(label), (name, label)
        if series(ax) > 1:
            assert ax.get_legend() is not None, (name, ax.get_title())


def check_png(path: Path) -> None:
    pixels = imread(path)
    height, width = pixels.shape[:2]
    assert width >= 600 and height >= 400, (path, pixels.shape)
    colours = np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0)
    assert len(colours) > 16, path


def check_run(run_dir: Path, expected: set[str]) -> dict[str, Figure]:
    """The launcher wrote exactly the expected PNGs, and each figure passes both checks."""
    assert {p.stem for p in (run_dir / "plots").glob("*.png")} == expected
    made = figures(load_run(run_dir))
    assert set(made) == expected
    for name, fig in made.items():
        check_figure(name, fig)
        check_png(run_dir / "plots" / f"{name}.png")
    return made


def line(ax: Axes, label: str) -> Any:
    return next(ln for ln in ax.lines if ln.get_label() == label)


def per_round(run: RunFiles, key: str, reduce: Any) -> list[float]:
    rounds = sorted({r["round"] for r in run.rows})
    return [reduce([r[key] for r in run.rows if r["round"] == k]) for k in rounds]


def test_a_tdma_dpsgd_run_plots_its_own_numbers(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary = launch_ok(run_dir, "rgg10", "d-psgd", *SYNTHETIC, "--rounds", "3",
                        "--eval-every", "1", "--set", "schedule=tdma", plots=True)
    made = check_run(run_dir, {"accuracy-round", "accuracy-bits", "accuracy-time",
                               "final-accuracy", "topology", "link-bytes"})
    run = load_run(run_dir)
    acc_round = made["accuracy-round"].axes[0]
    assert np.allclose(line(acc_round, "average").get_ydata(), per_round(run, "accuracy", np.mean))
    assert np.allclose(line(acc_round, "worst node").get_ydata(), per_round(run, "accuracy", min))
    assert line(made["accuracy-bits"].axes[0], "average").get_xdata()[-1] == \
        pytest.approx(summary["bits_per_client"])
    assert line(made["accuracy-time"].axes[1], "average").get_xdata()[-1] == \
        pytest.approx(summary["virtual_seconds"])
    legend = [t.get_text() for t in made["final-accuracy"].axes[0].get_legend().get_texts()]
    assert f"average {summary['avg_accuracy']:.4f}" in legend
    assert f"worst {summary['worst_accuracy']:.4f}" in legend
    heat = made["link-bytes"].axes[0].images[0].get_array()
    assert heat.sum() == summary["wire_bytes"] and heat.count() == 2 * len(run.plan.edges())
    topo = made["topology"]
    assert len(topo.axes[0].lines) == 2 * len(run.plan.edges())  # one half edge per sender
    assert "TDMA slot" in topo.axes[1].get_ylabel()


def test_adversaries_are_marked_and_the_bands_are_the_honest_nodes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    summary = launch_ok(run_dir, ring_file(tmp_path, 6), "d-psgd", *SYNTHETIC, "--rounds", "2",
                        "--eval-every", "1", "--set",
                        "adversaries={nodes: [2], behaviour: [{kind: sign-flip}]}", plots=True)
    made = check_run(run_dir, {"accuracy-round", "accuracy-bits", "accuracy-time",
                               "final-accuracy", "topology", "link-bytes"})
    run = load_run(run_dir)
    honest = RunFiles([r for r in run.rows if r["node"] != 2], run.summary, run.plan,
                      run.ledger, run.prephase)
    mine = [r["accuracy"] for r in sorted(run.rows, key=lambda r: r["round"]) if r["node"] == 2]
    acc_round = made["accuracy-round"].axes[0]
    assert np.allclose(line(acc_round, "honest average").get_ydata(),
                       per_round(honest, "accuracy", np.mean))
    assert np.allclose(line(acc_round, "honest worst node").get_ydata(),
                       per_round(honest, "accuracy", min))
    marked = line(acc_round, "adversary (node 2)")
    assert list(marked.get_ydata()) == mine
    assert (marked.get_color(), marked.get_marker()) == (ADVERSARY_COLOUR, ADVERSARY_MARKER)
    final = made["final-accuracy"].axes[0]
    legend = [t.get_text() for t in final.get_legend().get_texts()]
    assert f"honest average {summary['honest']['avg_accuracy']:.4f}" in legend
    assert f"honest worst {summary['honest']['worst_accuracy']:.4f}" in legend
    (crosses,) = [c for c in final.collections if c.get_label() == "adversary (node 2)"]
    assert crosses.get_offsets()[:, 0].tolist() == [mine[-1]]
    topo = made["topology"].axes[0]
    nodes, attacker = topo.collections
    assert len(nodes.get_offsets()) == 5 and nodes.get_label().startswith("honest node")
    assert attacker.get_label() == "adversary (node 2)"
    assert to_rgba(attacker.get_facecolor()[0]) == to_rgba(ADVERSARY_COLOUR)
    spots = {tuple(p) for p in nodes.get_offsets().tolist()}
    assert tuple(attacker.get_offsets()[0].tolist()) not in spots


@pytest.mark.slow
def test_an_ssdfl_run_draws_its_clusters(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    launch_ok(run_dir, "complete10", "ssd-fl", *SYNTHETIC, "--rounds", "2",
              "--set", "model={name: mlp}", "--set", "local_steps=1", "--set", "sample_size=20",
              plots=True)
    made = check_run(run_dir, {"accuracy-round", "accuracy-time", "final-accuracy", "topology",
                               "link-bytes", "accuracy-bits"})  # its formula bits: 32 P a send
    sizes = Counter(json.loads((run_dir / "prephase.json").read_text())["cluster_of"].values())
    legend = {t.get_text() for t in made["topology"].axes[0].get_legend().get_texts()}
    assert {f"cluster {c} ({n} nodes)" for c, n in sizes.items()} <= legend


@pytest.mark.slow
def test_a_dsc_run_plots_tasks_and_delta(tmp_path: Path) -> None:
    topo = tmp_path / "spec4.yaml"
    topo.write_text(SPEC4)
    launch_ok(tmp_path / "noagg", str(topo), "dsc-noagg", *DSC_TINY)
    summary = launch_ok(tmp_path / "dsc", str(topo), "dsc", *DSC_TINY,
                        "--set", f"hyper.delta_baseline={tmp_path / 'noagg'}", plots=True)
    made = check_run(tmp_path / "dsc", {"tasks-round", "delta", "final-task-score", "topology",
                                        "link-bytes"})
    titles = [ax.get_title() for ax in made["tasks-round"].axes]
    assert titles[:3] == ["Task dep: d1", "Task seg: pacc", "Task sn: a30"]
    curve = line(made["delta"].axes[1], "Δ_all").get_ydata()
    assert curve[-1] == pytest.approx(summary["delta_all"])
    bars = [p.get_height() for p in made["delta"].axes[0].patches]
    assert bars == pytest.approx([*(summary["delta_tasks"][t] for t in ("dep", "seg", "sn")),
                                  summary["delta_all"]])


def test_a_plotting_failure_is_one_line_and_keeps_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "summary.json").write_text('{"status": "ok"}')
    (tmp_path / "metrics.jsonl").write_text("{not json\n")
    configure("dfl-launch")  # as dfl-launch's entry point does: its warnings go to stderr
    plot_run(tmp_path)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"dfl-launch: plots: {tmp_path / 'plots'}: ")
    assert (tmp_path / "summary.json").read_text() == '{"status": "ok"}'


def test_a_run_that_failed_before_evaluating_plots_what_it_has(tmp_path: Path) -> None:
    topo = tmp_path / "spec4.yaml"
    topo.write_text(SPEC4)
    write_plan_only(RunSpec(topology=str(topo), protocol="d-psgd",
                            options={"dataset": "synthetic"}),
                    tmp_path / "plan.json")
    (tmp_path / "metrics.jsonl").write_text("")
    (tmp_path / "summary.json").write_text('{"status": "failed"}')
    assert write_plots(tmp_path) == [tmp_path / "plots" / "topology.png"]
    check_figure("topology", figures(load_run(tmp_path))["topology"])
    check_png(tmp_path / "plots" / "topology.png")
