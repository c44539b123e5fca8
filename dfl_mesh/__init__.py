"""dfl-mesh from Python: run a mesh, resume it, load a finished one, sweep a grid of them.

    import dfl_mesh
    result = dfl_mesh.run("ring20", "dmfl-sq", rounds=20, eval_every=5)
    result.metrics          # a pandas DataFrame, one row per evaluation of a node

The functions are the launcher's (`launcher/api`, `launcher/sweep`): `dfl-launch` and this
package parse the same settings and run the same code. Docs: docs/python-api.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from launcher.api.result import HonestSummary, RunResult, Summary, load
    from launcher.api.running import RunInterrupted, resume, run
    from launcher.errors import LaunchError as InputError
    from launcher.sweep.runner import SweepResult

__all__ = ["HonestSummary", "InputError", "RunInterrupted", "RunResult", "Summary", "SweepResult",
           "load", "resume", "run", "sweep"]


def __getattr__(name: str) -> Any:
    """The names of `__all__`, imported on first use: the launcher behind them imports pydantic
    and the config models, which a script pays for when it runs something, not on `import
    dfl_mesh` (issue 45). By plain imports, as protocols.sdk loads its names."""
    if name == "InputError":
        from launcher.errors import LaunchError

        names: dict[str, Any] = {"InputError": LaunchError}
    elif name == "SweepResult":
        from launcher.sweep.runner import SweepResult

        names = {"SweepResult": SweepResult}
    elif name in __all__:
        from launcher.api.result import HonestSummary, RunResult, Summary, load
        from launcher.api.running import RunInterrupted, resume, run

        names = {"RunResult": RunResult, "Summary": Summary, "HonestSummary": HonestSummary,
                 "load": load,
                 "RunInterrupted": RunInterrupted, "resume": resume, "run": run}
    else:
        raise AttributeError(f"module 'dfl_mesh' has no attribute {name!r}")
    globals().update(names)
    return names[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def sweep(file: str | Path | None = None, *, progress: bool = True, plots: bool = True,
          **spec: Any) -> SweepResult:
    """A sweep from a SWEEP.yaml file, or given here with the file's keys (`protocols=`,
    `topologies=`, `seeds=`, `grid=`, `settings=`, `out=`, ...); finished runs are skipped
    and interrupted ones resumed, so calling it again after an interrupt finishes the rest."""
    from launcher.errors import LaunchError as InputError
    from launcher.sweep.grid import checked
    from launcher.sweep.spec import from_mapping, load_spec

    if (file is None) == (not spec):
        raise InputError("sweep: give a sweep file or the sweep's keys, not both")
    parsed = load_spec(Path(file)) if file is not None else from_mapping(spec)
    if parsed.out is None:
        raise InputError("sweep: give `out`, the folder its runs go to")
    sweep = checked(parsed)  # bad input is refused before the runner's imports
    from launcher.sweep.runner import run_sweep

    return run_sweep(sweep, progress=progress, plots=plots)
