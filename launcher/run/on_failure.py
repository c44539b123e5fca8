"""What the launcher does when a node dies: `--on-failure stop` (default) or `continue`.

Two ways to learn of a death. The launcher sees its own children exit (a killed process, at
once). A node that hangs without dying, or one on another host, is found by its neighbours'
liveness (dfl_node/transports/liveness.py): they report an error naming it (`dead`), so the
launcher names the silent node, not the neighbour that noticed.

- stop: the first death or error ends the run: the nodes are stopped, the dead node is named,
  completed evaluations stay in metrics.jsonl, summary.json says what is known, exit 1.
- continue: a node that dies (exits without reporting an error) is recorded and the run goes
  on; the survivors agree on a smaller graph themselves (dfl_node/runner/membership.py) and
  report it in their final records. An error a node reports (the surviving graph is disconnected, a
  protocol failure) still ends the run. The run is done when every node has exited or was
  dropped by the survivors (a hung process is then stopped).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dfl_node.runner.records import DoneRecord
from launcher.run.faults import node_storage_failure, storage_failure
from launcher.run.outcome import Outcome

if TYPE_CHECKING:  # the collector brings ZeroMQ, which only a running launch needs
    from launcher.run.collector import Collector

RECORD_GRACE_S = 0.3  # how long an exit waits for the error record its node may have sent

Exits = Mapping[int, int | None]  # node -> exit code, None while running


def describe_exit(code: int) -> str:
    if code < 0:
        return f"killed by signal {-code} ({signal.Signals(-code).name})"
    return f"exit status {code}"


@dataclass
class FailureWatch:
    """The launcher's side of a run's failures, fed with its children's exit codes."""

    collector: Collector
    tolerant: bool
    deaths: dict[int, str] = field(default_factory=dict)

    def failure(self, exits: Exits) -> Outcome | None:
        """The outcome that ends the run now, or None while it goes on."""
        if self.collector.fault is not None:
            return storage_failure(self.collector.fault)
        if self.collector.errors:
            return self.blame()
        new = {i: code for i, code in exits.items() if code and i not in self.deaths}
        if not new:
            return None
        self._pump_for(RECORD_GRACE_S)
        if self.collector.errors:
            return self.blame()
        if not self.tolerant:
            node = min(new)
            return Outcome(False, node, describe_exit(int(new[node])), failed_at=time.time())
        self.deaths.update({i: describe_exit(int(code)) for i, code in new.items()})
        return None

    def _pump_for(self, seconds: float) -> None:
        """Take records for `seconds` (not until a quiet gap: the survivors keep reporting)."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self.collector.pump(left)

    def blame(self) -> Outcome:
        """The run's failure from the nodes' error records: the run directory's storage if a
        node could not write there (its neighbours may report it dead after it exits), else
        the nodes they found dead, if any, else the first node that reported an error."""
        errors, reports = self.collector.errors, self.collector.dead_reports
        storage = node_storage_failure(self.collector.io_faults, self.collector.run_dir)
        if storage is not None:
            return storage
        if reports:
            dead = sorted({i for ids in reports.values() for i in ids})
            witness = min(reports)
            return Outcome(False, dead[0], errors[witness], failed_at=time.time(),
                           silent_intervals=self.collector.silences.get(witness))
        node = min(errors)
        return Outcome(False, node, errors[node], failed_at=time.time())

    def dropped(self) -> set[int]:
        """The nodes the survivors agreed to run without."""
        return {i for rec in self.collector.done.values() for i in rec.dead}

    def finished(self, exits: Exits) -> bool:
        dropped = self.dropped() if self.tolerant else set()
        return all(code is not None or i in dropped for i, code in exits.items())

    def success(self, pids: dict[int, int]) -> Outcome:
        for node in sorted(self.dropped() - set(self.deaths)):
            self.deaths[node] = "stopped answering (dropped by the survivors)"
        return Outcome(True, pids=pids, deaths=dict(sorted(self.deaths.items())))


def failure_keys(outcome: Outcome, done: Mapping[int, DoneRecord]) -> dict[str, Any]:
    """summary.json's `failures` (which nodes died, why), `failed_at` (when the launcher
    concluded the run failed, Unix time) and `graph_changes` (from which round the survivors
    ran on which graph: `round` is the first round, 0-based, run on it)."""
    failures = [{"node": node, "reason": reason} for node, reason in outcome.deaths.items()]
    if outcome.failed_node is not None and outcome.failed_node not in outcome.deaths:
        failures.append({"node": outcome.failed_node, "reason": outcome.reason,
                         **({} if outcome.silent_intervals is None
                            else {"silent_intervals": outcome.silent_intervals})})
    views = {node: rec.membership.changes for node, rec in sorted(done.items())
             if rec.membership is not None}
    distinct = {repr(changes) for changes in views.values()}
    keys: dict[str, Any] = {"failures": failures, "failed_at": outcome.failed_at or None,
                            "graph_changes": next(iter(views.values()), []) if views else []}
    if len(distinct) > 1:
        keys["graph_changes_by_node"] = {str(node): changes for node, changes in views.items()}
    return keys
