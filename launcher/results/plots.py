"""`RUN_DIR/plots/*.png`, written at the end of a run from the files it wrote.

Plotting comes after summary.json and the ledgers are on disk and may fail without costing the
run anything: a figure that cannot be drawn is one line on stderr, never a lost result or
another exit code.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from matplotlib.figure import Figure

from launcher.logs import launcher_logger
from launcher.results.plots_curves import (
    BITS,
    ROUND,
    TIME,
    curves_figure,
    delta_figure,
    distribution_figure,
    tasks_figure,
)
from launcher.results.plots_data import RunFiles, load_run
from launcher.results.plots_network import link_bytes_figure, topology_figure

LOG = launcher_logger("plots")

FigureMaker = Callable[[RunFiles], Figure | None]

COMMON: dict[str, FigureMaker] = {
    "topology": topology_figure,
    "link-bytes": link_bytes_figure,
}
ACCURACY: dict[str, FigureMaker] = {
    "accuracy-round": lambda run: curves_figure(run, ROUND),
    "accuracy-bits": lambda run: curves_figure(run, BITS),
    "accuracy-time": lambda run: curves_figure(run, TIME),
    "final-accuracy": distribution_figure,
}
TASKS: dict[str, FigureMaker] = {
    "tasks-round": tasks_figure,
    "delta": delta_figure,
    "final-task-score": distribution_figure,
}


def figures(run: RunFiles) -> dict[str, Figure]:
    """Every figure this run has the data for, by file stem: a multi-task protocol's runs get
    task plots in place of accuracy curves."""
    makers = {**(TASKS if run.multitask else ACCURACY), **COMMON}
    made = {name: make(run) for name, make in makers.items()}
    return {name: fig for name, fig in made.items() if fig is not None}


def write_plots(run_dir: Path) -> list[Path]:
    out = run_dir / "plots"
    out.mkdir(exist_ok=True)
    written = []
    for name, fig in figures(load_run(run_dir)).items():
        path = out / f"{name}.png"
        fig.savefig(path)
        written.append(path)
    return written


def plot_run(run_dir: Path) -> None:
    """write_plots, logging a failure instead of raising: the run is already saved."""
    try:
        write_plots(run_dir)
    except Exception as exc:  # any plotting bug must not turn a finished run into a crash
        LOG.warning("plots: %s: %s: %s", run_dir / "plots", type(exc).__name__, exc)
