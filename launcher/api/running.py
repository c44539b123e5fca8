"""`dfl_mesh.run` and `dfl_mesh.resume`: a mesh from a script or a notebook cell.

The run goes through the same `launch_one` as `dfl-launch`. What differs is only how it shows
itself: a progress bar on a terminal or in a notebook (rich draws a widget there), nothing but
the last line otherwise; and how it ends: a result object, bad input as an exception
(`InputError`, the CLI's exit 2), an interrupt (Ctrl-C, a kernel interrupt) as `RunInterrupted`
once every node of the mesh is gone.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from launcher.api.result import RunResult
from launcher.api.settings import keyword_spec
from launcher.config.options import ViewOptions
from launcher.errors import LaunchError
from launcher.launch import launch_one
from launcher.run import directory
from launcher.run.watched import interactive


class RunInterrupted(KeyboardInterrupt):
    """The run was interrupted; its nodes are stopped and its completed evaluations kept."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(f"interrupted; completed evaluations kept in {run_dir}")
        self.run_dir = run_dir


def run(topology: Any, protocol: Any, *, config: str | Path | None = None,
        out: str | Path | None = None, progress: bool = True, plots: bool = True,
        overrides: Mapping[str, Any] | None = None, **settings: Any) -> RunResult:
    """Run one mesh to its end; the finished run directory as a `RunResult`.

    `settings` are `dfl-launch`'s run options by their Python names (`rounds`, `seed`,
    `dataset`, `data_root`, `partition`, `eval_every`, `transport`, `deadline`, ...) and any
    config key or hyper-parameter (`lr=0.05`); `overrides` takes dotted keys
    (`{"accounting.b_hdr": 32}`). A failed run returns (check `.ok`); bad input raises
    `InputError` before anything starts.

    On the local transports (zmq, inproc) the topology may be a networkx graph or a Topology,
    the protocol a ProtocolNode class, `model=` a function returning a torch module and `dataset=`
    `{"train": ..., "test": ...}` of arrays or torch Datasets (launcher/api/objects.py).
    """
    req = keyword_spec(topology, protocol, config, settings, overrides or {})
    if req.seeds:
        raise LaunchError("seeds=: one run per call; dfl_mesh.sweep(...) runs a seed range")
    assert req.topology is not None and req.protocol is not None
    run_dir = Path(out) if out is not None else directory.default_run_dir(
        req.protocol.rpartition(".")[2] if req.objects and req.objects.protocol
        else req.protocol, Path(req.topology).stem)
    return finish(launch_one(req, run_dir, view(progress, plots)), run_dir)


def resume(run_dir: str | Path, *, progress: bool = True, plots: bool = True,
           on_corrupt: str | None = None) -> RunResult:
    """Continue a stopped or killed run from its checkpoints (`dfl-launch --resume`);
    `on_corrupt` ("fallback" or "stop") replaces the run's policy for a refused checkpoint."""
    from launcher.run.resume import resume_request

    where = Path(run_dir)
    return finish(launch_one(resume_request(where, on_corrupt), where, view(progress, plots),
                             resuming=True), where)


def view(progress: bool, plots: bool) -> ViewOptions:
    return ViewOptions(quiet=not (progress and interactive()), plots=plots)


def finish(code: int, run_dir: Path) -> RunResult:
    from launcher.run.finish import EXIT_INTERRUPTED  # a run's end: not before its checks

    if code == EXIT_INTERRUPTED:
        raise RunInterrupted(run_dir)
    return RunResult(run_dir)
