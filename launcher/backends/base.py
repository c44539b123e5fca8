"""The Backend interface: how a plan's nodes get started, and how their results come back.

Two kinds, by who starts the nodes. A LocalBackend is run by `dfl-launch` itself: it opens the
run's collector, starts every node, watches them and returns the run's Outcome; `--transport`
names one (registry.py). A HandOffBackend writes what the nodes need for someone else to start
them (an operator on each host, a container engine); the nodes then report to the plan's
collector address, where `dfl-launch collect` (launcher/collect_remote.py) gathers the results.

What a backend is and supports (its name, the runtime transport its nodes speak, `--secure`,
whether its nodes are threads of the launcher) is its `spec`, kept in
launcher/config/backend_catalog.py so that configuration can check it before anything runs.
A new backend is a module here with one class, its spec there, and (for a local one) an entry
in registry.py.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from dfl_node.plan import RunPlan
from launcher.config.backend_catalog import BackendEntry
from launcher.config.run_spec import RunSpec

if TYPE_CHECKING:  # ZeroMQ and numpy: what a backend runs with, not what `plan` refuses with
    from dfl_node.runner.prephase_client import InprocPrephaseHub
    from launcher.results.cycle_metrics import CycleMetrics
    from launcher.run.collector import Collector
    from launcher.run.outcome import Outcome

OnRecord = Callable[[str, dict[str, Any]], None]


class Backend(ABC):
    """One way of starting a plan's nodes."""

    spec: ClassVar[BackendEntry]

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass
class LocalMesh:
    """A run's nodes, set up but not started: the collector listens already, so no record of
    an early node is lost; `run` starts the nodes and returns once the run has ended."""

    collector: Collector
    run: Callable[[], Outcome]
    # the pre-phase's meeting point when the nodes are threads of this process (None: the
    # coordinator listens on the plan's address, as for nodes anywhere else)
    prephase_hub: InprocPrephaseHub | None = None


class LocalBackend(Backend):
    """`dfl-launch` starts every node itself and watches it to the end."""

    def prestart(self) -> None:
        """Start, first thing in a launch (before the plan is resolved, while the launcher has
        no thread yet), what this backend will start nodes from; `open` starts it otherwise."""

    def close(self) -> None:
        """End what `prestart` or `open` started (the nodes have ended)."""

    def preflight(self, plan: RunPlan, topology: str) -> None:
        """Bad input only this backend can see (a LaunchError), before the run directory is
        written or anything starts; `topology` names the file for the message."""

    @abstractmethod
    def open(self, plan: RunPlan, plan_path: Path, run_dir: Path,
             cycles: CycleMetrics | None, on_record: OnRecord) -> LocalMesh:
        """The run's collector (feeding `cycles` and `on_record`) and the nodes, ready to run."""


class HandOffBackend(Backend):
    """`dfl-launch` writes what the nodes need; someone else starts them."""

    @abstractmethod
    def resolve(self, req: RunSpec) -> RunPlan:
        """The plan the nodes will run, with every address they need fixed in it."""

    @abstractmethod
    def hand_off(self, plan: RunPlan, out: Path) -> Path:
        """Write the plan and what else the nodes need at `out`; the file to start from."""
