"""The small run every check of the kit makes, and where its run directories go.

A plugin author names the protocol and, where the defaults do not suit it, the run settings
(`dfl_mesh.run`'s keywords: `rounds`, `dataset`, `model`, hyper-parameters such as `lr`) and a
topology. The defaults make a run of seconds that still tells bugs apart: four nodes whose
degrees differ (a ring with one chord, so weights and counts that depend on the degree are not
all equal), three rounds, a small MLP on synthetic data.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.api.result import RunResult
from launcher.api.running import run
from launcher.api.settings import keyword_spec
from launcher.config.options import command_line
from launcher.config.run_spec import RunSpec

# Nodes 0 and 2 have three neighbours, 1 and 3 two.
KIT_TOPOLOGY = """\
nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}]
edges: [[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]]
"""

DEFAULT_SETTINGS: dict[str, Any] = {
    "rounds": 3, "dataset": "synthetic", "partition": "iid", "model": {"name": "mlp"},
}


@dataclass(frozen=True)
class Mesh:
    """One protocol with its run settings: what each check runs, once or several times."""

    protocol: str
    topology: Path
    settings: Mapping[str, Any]
    overrides: Mapping[str, Any] = field(default_factory=dict)

    @property
    def rounds(self) -> int:
        return int(self.settings["rounds"])

    def run(self, out: Path, **more: Any) -> RunResult:
        """The run into `out`; an AssertionError naming the reason if it did not end ok."""
        result = run(self.topology, self.protocol, out=out, progress=False, plots=False,
                     overrides=self.overrides, **{**self.settings, **more})
        check_ok(result, f"{self.protocol} ({describe(more)})")
        return result

    def spec(self, **more: Any) -> RunSpec:
        """The run's RunSpec, as `run` makes it."""
        return keyword_spec(self.topology, self.protocol, None, {**self.settings, **more},
                            self.overrides)

    def argv(self, **more: Any) -> list[str]:
        """The same run as `dfl-launch` arguments, for a run in a process of its own."""
        return command_line(self.spec(**more))


def describe(settings: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items()) or "defaults"


def check_ok(result: RunResult, what: str) -> None:
    if not result.ok:
        raise AssertionError(f"{what}: the run ended {result.summary.status} "
                             f"(exit {result.exit_code}); see {result.run_dir}/logs")


def mesh(protocol: str, where: Path, topology: str | Path | None,
         overrides: Mapping[str, Any] | None, settings: Mapping[str, Any]) -> Mesh:
    """The check's mesh; without a topology, KIT_TOPOLOGY written into `where`."""
    if topology is None:
        topology = where / "kit-topology.yaml"
        topology.write_text(KIT_TOPOLOGY)
    return Mesh(protocol, Path(topology), {**DEFAULT_SETTINGS, **settings}, dict(overrides or {}))


@contextlib.contextmanager
def workspace(workdir: str | Path | None) -> Iterator[Path]:
    """`workdir`, or a temporary directory removed when the check passes. A failing check's
    runs are kept, and its message says where."""
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
        yield Path(workdir)
        return
    where = Path(tempfile.mkdtemp(prefix="dfl-kit-"))
    try:
        yield where
    except AssertionError as exc:
        raise AssertionError(f"{exc} (runs kept in {where})") from None
    shutil.rmtree(where, ignore_errors=True)
