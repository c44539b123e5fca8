"""The end of a run, whoever started its nodes (this host's processes, the hosts of a
multi-host mesh, a Slurm job): its files, its last line and its exit code.

Apart from launcher/launch.py, which starts local nodes and imports torch for them, so that a
run collected here (`dfl-launch slurm --submit`, `dfl-launch collect`) imports no torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dfl_node.plan import RunPlan
from launcher.config.options import ViewOptions
from launcher.logs import launcher_logger
from launcher.run import rundir
from launcher.run.collector import Collector
from launcher.run.linkreport import write_link_report
from launcher.run.outcome import Outcome
from launcher.run.progress import Display
from launcher.run.summary import summarize, write_ledger

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
LOG = launcher_logger("launch")


def write_results(plan: RunPlan, config: dict[str, Any], collector: Collector,
                  outcome: Outcome, seconds: float, run_dir: Path, view: ViewOptions,
                  display: Display) -> dict[str, Any]:
    """A finished run's files, whoever started its nodes: summary.json, the ledger, the link
    report and (unless turned off) the plots; the summary back."""
    summary = summarize(plan, config, collector, outcome, seconds)
    rundir.write_json(run_dir / "summary.json", summary)
    write_ledger(run_dir, collector.done)
    write_link_report(run_dir, plan, collector.done)
    if view.plots:
        from launcher.results.plots import plot_run  # matplotlib: only runs that plot import it

        display.stage("writing plots")
        plot_run(run_dir)
    return summary


def log_tail(run_dir: Path, node_id: int, lines: int = 5) -> str:
    path = run_dir / "logs" / f"node-{node_id}.log"
    text = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
    return "\n".join(text[-lines:])


def report(outcome: Outcome, run_dir: Path, summary: dict[str, Any],
           display: Display | None = None) -> int:
    """The last line on stdout (the display's kind), the failure on stderr; the exit code."""
    (display or Display(pipe=False)).final(run_dir, outcome, summary)
    for node, reason in outcome.deaths.items():
        LOG.warning("node %s died (%s); the others went on without it "
                    "(summary.json: failures, graph_changes)", node, reason)
    if outcome.ok:
        return EXIT_OK
    if outcome.status == "interrupted":
        LOG.error("interrupted; completed evaluations kept in %s", run_dir)
        return EXIT_INTERRUPTED
    failed = outcome.failed_node
    tail = log_tail(run_dir, failed) if failed is not None else ""
    LOG.error("node %s failed (%s); run directory %s%s", failed, outcome.reason, run_dir,
              f"\n{tail}" if tail else "")
    return EXIT_FAILED
