"""A finished (or stopped) run directory as an object: typed summary, DataFrames, files, plots.

Everything is read lazily from the directory, so `load()` of a run written by the command line,
by another machine or by an older session gives the same object `run()` returns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from dfl_node.state import sealed_file
from dfl_node.state.sealed_file import CorruptFile
from launcher.errors import LaunchError

if TYPE_CHECKING:
    import pandas as pd

EXIT_CODES = {"ok": 0, "failed": 1, "interrupted": 130}


@dataclass(frozen=True)
class HonestSummary:
    """summary.json's `honest`: the figures of a run with adversaries over its honest clients
    alone (docs/run-directory.md#honest-nodes), which is what a robustness study compares.
    `consensus_distance` is None when the final models are on other hosts; the backdoor's
    figures are None in a run without one."""

    nodes: tuple[int, ...]
    avg_accuracy: float | None
    worst_accuracy: float | None
    bottom10_accuracy: float | None
    std_accuracy: float | None
    jain_index: float | None
    cvar10_loss: float | None
    consensus_distance: float | None
    backdoor_asr: float | None = None
    worst_backdoor_asr: float | None = None

    @classmethod
    def of(cls, raw: dict[str, Any]) -> HonestSummary:
        values: dict[str, Any] = {f.name: raw.get(f.name) for f in fields(cls)}
        values["nodes"] = tuple(raw.get("nodes") or ())
        return cls(**values)


@dataclass(frozen=True)
class Summary:
    """The keys of summary.json a script reaches for most; the rest stay in `RunResult.raw`.
    `adversaries` and `honest` are set in a run with adversaries only (its adversaries' ids,
    and the honest clients' own figures)."""

    status: str
    protocol: str
    topology: str
    rounds: int
    seed: int
    dataset: str
    transport: str
    avg_accuracy: float | None
    worst_accuracy: float | None
    bits_per_client: float
    wire_bytes: int
    wall_seconds: float
    virtual_seconds: float
    failed_node: int | None = None
    failures: tuple[dict[str, Any], ...] = ()  # nodes that died, and why
    adversaries: tuple[int, ...] = ()
    honest: HonestSummary | None = None

    @classmethod
    def of(cls, raw: dict[str, Any]) -> Summary:
        values: dict[str, Any] = {f.name: raw.get(f.name) for f in fields(cls)}
        values["failures"] = tuple(raw.get("failures") or ())
        values["adversaries"] = tuple(sorted(int(i) for i in raw.get("adversaries") or {}))
        honest = raw.get("honest")
        values["honest"] = HonestSummary.of(honest) if honest is not None else None
        return cls(**values)


class RunResult:
    """One run directory. `ok` and `exit_code` say how it ended, as `dfl-launch` would."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)

    def __repr__(self) -> str:
        s = self.summary
        return (f"RunResult({str(self.run_dir)!r}, {s.protocol} on {s.topology}, {s.status}, "
                f"avg_accuracy={s.avg_accuracy}, worst_accuracy={s.worst_accuracy})")

    def _repr_html_(self) -> str:
        """A notebook cell that ends with a result shows its summary as a small table."""
        rows = "".join(f"<tr><th style='text-align:left'>{f.name}</th>"
                       f"<td>{getattr(self.summary, f.name)}</td></tr>" for f in fields(Summary))
        return f"<b>{self.run_dir}</b><table>{rows}</table>"

    @cached_property
    def raw(self) -> dict[str, Any]:
        """summary.json, whole (docs/run-directory.md)."""
        path = self.run_dir / "summary.json"
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise LaunchError(f"{self.run_dir}: no summary.json (not a finished run "
                              "directory; dfl_mesh.resume() continues a stopped one)") from None
        except (OSError, ValueError) as exc:
            raise LaunchError(f"{path}: unreadable: {exc}") from None
        if not isinstance(data, dict):
            raise LaunchError(f"{path}: not a summary (expected a JSON object)")
        return data

    @property
    def summary(self) -> Summary:
        return Summary.of(self.raw)

    @property
    def ok(self) -> bool:
        return self.summary.status == "ok"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.summary.status, 1)

    @cached_property
    def config(self) -> dict[str, Any]:
        """The resolved config the run used (config.yaml)."""
        data = yaml.safe_load((self.run_dir / "config.yaml").read_text())
        return data if isinstance(data, dict) else {}

    @cached_property
    def metrics(self) -> pd.DataFrame:
        """metrics.jsonl: one row per evaluation of a node (`round`, `node`, `accuracy`,
        `loss`, and what the protocol adds, e.g. cumulative `formula_bits`)."""
        return read_jsonl(self.run_dir / "metrics.jsonl")

    @cached_property
    def cycles(self) -> pd.DataFrame:
        """cycles.jsonl where the protocol writes one: one row per cycle."""
        return read_jsonl(self.run_dir / "cycles.jsonl")

    @cached_property
    def ledger(self) -> pd.DataFrame:
        """ledger.json as rows: what each node recorded per link, round and traffic kind
        (`recorded_by`, `src`, `dst`, `round`, `traffic`, `messages`, `payload_bytes`,
        `framing_bytes`)."""
        data = json.loads((self.run_dir / "ledger.json").read_text())
        rows = [{"recorded_by": int(node), **cell}
                for node, book in data.items() for cell in book.get("cells", [])]
        return frame(rows)

    @cached_property
    def links(self) -> pd.DataFrame:
        """Per-link data totals as each endpoint recorded them (`recorded_by`, `src`, `dst`,
        `messages`, `payload_bytes`, `framing_bytes`)."""
        data = json.loads((self.run_dir / "ledger.json").read_text())
        rows = []
        for node, book in data.items():
            for link, totals in book.get("per_link", {}).items():
                src, dst = link.split("->")
                rows.append({"recorded_by": int(node), "src": int(src), "dst": int(dst),
                             **totals})
        return frame(rows)

    @property
    def files(self) -> dict[str, Path]:
        """The run directory's files by their path inside it (docs/run-directory.md)."""
        return {str(p.relative_to(self.run_dir)): p
                for p in sorted(self.run_dir.rglob("*")) if p.is_file()}

    def verify(self) -> dict[str, str]:
        """Check every final model (final/*.safetensors) against the digest it carries, before
        a script trusts it: each file's name -> its SHA-256; InputError naming the first file
        that fails (a changed byte, a cut file, a file without a digest)."""
        digests = {}
        for path in sorted((self.run_dir / "final").glob("*.safetensors")):
            try:
                digests[path.name] = sealed_file.verify(path).digest
            except CorruptFile as exc:
                raise LaunchError(str(exc)) from None
        return digests

    @property
    def plots(self) -> dict[str, Path]:
        """plots/*.png by name (`accuracy`, `bits`, ...); empty for a run made without plots."""
        return {p.stem: p for p in sorted((self.run_dir / "plots").glob("*.png"))}

    def show(self, plot: str) -> Any:
        """A plot as a notebook image (IPython's), e.g. `result.show("accuracy")`."""
        from IPython.display import Image

        try:
            return Image(filename=str(self.plots[plot]))
        except KeyError:
            raise LaunchError(f"{self.run_dir}: no plot {plot!r} "
                              f"(there are: {', '.join(self.plots) or 'none'})") from None


def read_jsonl(path: Path) -> pd.DataFrame:
    """A JSON-lines file as rows; a torn last line (a killed writer) is left out."""
    if not path.is_file():
        return frame([])
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return frame(rows)


def load(run_dir: str | Path) -> RunResult:
    """A run directory written earlier, by `run()` or by `dfl-launch`; checked at once."""
    result = RunResult(Path(run_dir))
    result.summary  # noqa: B018  (reading it is the check: bad input fails here, not later)
    return result


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """`rows` as a DataFrame. pandas is imported here, by a result's first table: `import
    dfl_mesh`, and a run refused for bad input, need none of its half CPU-second."""
    import pandas as pd

    return pd.DataFrame(rows)
