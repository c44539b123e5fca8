"""The end of a run, whoever started its nodes (this host's processes, the hosts of a
multi-host mesh, a Slurm job): its files, its last line and its exit code.

Apart from launcher/launch.py, which starts local nodes and imports torch for them, so that a
run collected here (`dfl-launch slurm --submit`, `dfl-launch collect`) imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dfl_node.plan import RunPlan
from launcher import stop_signals
from launcher.config.options import ViewOptions
from launcher.logs import launcher_logger
from launcher.run import directory
from launcher.run.faults import (
    STORAGE_KINDS,
    errno_name,
    exit_code_of,
    launcher_storage_cause,
    storage_failure,
)
from launcher.run.linkreport import write_link_report
from launcher.run.outcome import Outcome
from launcher.run.progress import Display
from launcher.run.summary import summarize, write_ledger

if TYPE_CHECKING:  # the collector brings ZeroMQ, which only a running launch needs
    from launcher.run.collector import Collector

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130
LOG = launcher_logger("launch")


@dataclass
class Results:
    """A run's end as written: how it ended (a storage fault met while writing its files
    turns an ok run into a failed one), its summary, and why summary.json could not be
    written (None: it was)."""

    outcome: Outcome
    summary: dict[str, Any]
    unwritten: str | None = None


def save(plan: RunPlan, config: dict[str, Any], collector: Collector, outcome: Outcome,
         seconds: float, run_dir: Path) -> Results:
    """ledger.json and the link report, then summary.json last: the summary is the run's
    record of how it ended, so a write refused before it is in it, and it is the one file whose
    loss stderr reports. The first cause stands: a failed run's summary names what ended it,
    not a later refusal."""
    if outcome.ok and collector.fault is not None:
        outcome = storage_failure(collector.fault)
    written = run_dir / "ledger.json"
    try:
        write_ledger(run_dir, collector.done)
        written = run_dir / "links.json"
        write_link_report(run_dir, plan, collector.done)
    except OSError as exc:
        if outcome.ok:
            outcome = storage_failure(launcher_storage_cause(exc, written, run_dir))
    summary = summarize(plan, config, collector, outcome, seconds)
    try:
        directory.write_json(run_dir / "summary.json", summary)
    except OSError as exc:
        if outcome.ok:
            outcome = storage_failure(launcher_storage_cause(exc, run_dir / "summary.json",
                                                             run_dir))
        return Results(outcome, summary,
                       f"summary.json not written: {exc.strerror or exc} ({errno_name(exc)})")
    return Results(outcome, summary)


def write_results(plan: RunPlan, config: dict[str, Any], collector: Collector,
                  outcome: Outcome, seconds: float, run_dir: Path, view: ViewOptions,
                  display: Display) -> Results:
    """A finished run's files, whoever started its nodes: `save`'s, and (unless turned off,
    or the run directory refused a write already) the plots."""
    results = save(plan, config, collector, outcome, seconds, run_dir)
    cause = results.outcome.cause
    if view.plots and (cause is None or cause.kind not in STORAGE_KINDS):
        from launcher.results.plots import plot_run  # matplotlib: only runs that plot import it

        display.stage("writing plots")
        plot_run(run_dir)
    return results


def log_tail(run_dir: Path, node_id: int, lines: int = 5) -> str:
    path = run_dir / "logs" / f"node-{node_id}.log"
    text = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
    return "\n".join(text[-lines:])


def report(results: Results, run_dir: Path, display: Display | None = None) -> int:
    """The last line on stdout (the display's kind), the end on stderr; the exit code. A run
    that a node did not end (a signal, the disk, the zygote) gets one line, and one more if
    summary.json could not be written; a failed node's line comes with its log's last lines."""
    outcome = results.outcome
    (display or Display(pipe=False)).final(run_dir, outcome, results.summary)
    for node, reason in outcome.deaths.items():
        LOG.warning("node %s died (%s); the others went on without it "
                    "(summary.json: failures, graph_changes)", node, reason)
    if not outcome.ok:
        LOG.error("%s", end_line(outcome, run_dir))
    if results.unwritten:
        LOG.error("%s", results.unwritten)
    if outcome.ok:
        return EXIT_OK
    stopped_by = exit_code_of(outcome)
    return EXIT_FAILED if stopped_by is None else stopped_by


def end_line(outcome: Outcome, run_dir: Path) -> str:
    """What stderr says of a run that did not finish (a failed node's with its log's tail)."""
    if outcome.status == "interrupted":
        why = outcome.cause.message if outcome.cause else outcome.reason
        return f"{why}; completed evaluations kept in {run_dir}"
    if outcome.cause is not None:
        return f"{outcome.cause.message}; the run stopped; run directory {run_dir}"
    failed = outcome.failed_node
    tail = log_tail(run_dir, failed) if failed is not None else ""
    return (f"node {failed} failed ({outcome.reason}); run directory {run_dir}"
            + (f"\n{tail}" if tail else ""))


def stopped(code: int) -> bool:
    """Whether a run's exit code (or a signal this launcher took) says to start no more runs."""
    return code == EXIT_INTERRUPTED or stop_signals.received() is not None
