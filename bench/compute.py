"""Compute-bound overhead: a DMFL-SQ round of the CIFAR CNN over ZeroMQ against in-process.

`python -m bench.compute [--full] [--data-root DIR]` runs dmfl-sq on ring20 with the paper's
CIFAR-10 setting (protocols/configs/dmfl-sq-cifar10.yaml: the 2.1M-parameter CNN, Q8 o Top-1%)
for a few rounds, evaluating only after the last, once with `--transport zmq` (one process
per node) and once with `--transport inproc` (every node a thread of the launcher), in turn
(bench/figures.py: interleaved repetitions). The figure is the ratio of their wall seconds per
round, from each run's own record (`summary.json` `round_seconds`: the nodes' mean wall time in
each round, without start-up, evaluation or the final save; round 0, the warm-up, left out).
Goal: <= 1.1, i.e. real sockets and separate processes cost at most 10 % of a round whose time
is the CNN's.

Threads: both runs use the default `torch_threads: 1`, one compute thread per node. Under zmq
each of the 20 processes runs torch with one thread (the launcher also sets OMP_NUM_THREADS=1);
under inproc `apply_runtime` sets the launcher process's torch pool to one thread, so each of
the 20 node threads computes in itself and none fans out. Both thus offer 20 compute threads to
the machine's cores: with 20 nodes and fewer cores no core is idle, and one thread per node is
the least a node can have, so neither side adds oversubscription the other lacks (more threads
per node would only make 20 x k threads fight over the same cores).

Both runs share the seed, so the project's promise says their `final/` files (parameters and
neighbour copies) are identical bit for bit; the second figure checks it, byte by byte.

Data: the CIFAR-10 images as `dfl-launch --data-root` reads them, by default the project's copy
kept beside the repository (`shared/data` in the directory that holds the checkout, with
cifar10-jpeg.tar.gz). The launcher's locator checks them before any run, so without them the
group ends at once, saying what it needs.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.figures import Figure, Mode, compare, interleaved, median
from bench.launch import ROOT, DataMissing, later_rounds, launch, require_data

DATA_ROOT = ROOT.parent / "shared" / "data"
CONFIG = ROOT / "protocols" / "configs" / "dmfl-sq-cifar10.yaml"
NODES = 20
GOAL = 1.1


QUICK = Mode(reps=2, rounds=5, note="quick: 2 interleaved repetitions of 5-round runs")
FULL = Mode(reps=5, rounds=12, note="full: 5 interleaved repetitions of 12-round runs")


@dataclass
class Run:
    """One transport's run, called once per repetition: wall seconds per round, run dirs."""

    transport: str
    rounds: int
    work: Path
    data_root: Path
    dirs: list[Path] = field(default_factory=list, init=False)

    def __call__(self) -> float:
        out = self.work / f"{self.transport}-{len(self.dirs)}"
        options = ["--topology", "ring20", "--protocol", "dmfl-sq", "--config", str(CONFIG),
                   "--data-root", str(self.data_root), "--rounds", str(self.rounds),
                   "--eval-every", str(self.rounds), "--transport", self.transport]
        summary = launch(options, out, f"bench.compute: the {self.transport} run")
        self.dirs.append(out)
        return seconds_per_round(summary)


def seconds_per_round(summary: dict[str, Any]) -> float:
    """Median over rounds after the first of the nodes' mean wall seconds per round."""
    return median(later_rounds(summary) or list(summary["round_seconds"].values()))


def identical_finals(a: Path, b: Path) -> tuple[int, int]:
    """(files of `final/` byte-identical in both runs, files): every node's parameters and,
    for dmfl-sq, its neighbour copies (node-<id>-copies.safetensors)."""
    names = sorted(p.name for p in (a / "final").glob("*.safetensors"))
    same = sum((a / "final" / n).read_bytes() == (b / "final" / n).read_bytes()
               for n in names if (b / "final" / n).exists())
    return same, len(names)


def figures(quick: bool, data_root: Path | None = None) -> list[Figure]:
    """The two figures; `data_root` None: DATA_ROOT. Raises bench.launch.DataMissing, before any
    run, when the launcher finds no CIFAR-10 there."""
    mode = QUICK if quick else FULL
    data_root = DATA_ROOT if data_root is None else data_root.absolute()
    require_data("cifar10", data_root)
    with tempfile.TemporaryDirectory(prefix="dfl-bench-compute-") as tmp:
        runs = {t: Run(t, mode.rounds, Path(tmp), data_root) for t in ("zmq", "inproc")}
        samples = interleaved(runs, mode.reps)
        checks = [identical_finals(z, i) for z, i in zip(runs["zmq"].dirs, runs["inproc"].dirs,
                                                         strict=True)]
    note = f"{mode.note}; {os.cpu_count()} cores, torch_threads 1 per node in both"
    extra: dict[str, float | str] = {
        f"{t}_samples_s": ", ".join(f"{s:.3f}" for s in samples[t]) for t in samples}
    same, files = sum(s for s, _ in checks), sum(n for _, n in checks)
    return [
        compare("compute", f"dmfl-sq round, ring{NODES}, CIFAR CNN 2.1M params (zmq)",
                median(samples["zmq"]), "s", "the same run with --transport inproc",
                median(samples["inproc"]), goal_max=GOAL, reps=mode.reps, note=note,
                extra=extra),
        compare("compute", "zmq and inproc final/ files identical bit for bit", same,
                "files", "files compared", files, goal_min=1.0, reps=mode.reps, note=note,
                extra={"per_repetition": ", ".join(f"{s}/{n}" for s, n in checks)}),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="5 repetitions of longer runs")
    parser.add_argument("--data-root", type=Path, default=None,
                        help=f"CIFAR-10 as dfl-launch --data-root reads it (default {DATA_ROOT})")
    args = parser.parse_args()
    try:
        found = figures(quick=not args.full, data_root=args.data_root)
    except DataMissing as exc:
        raise SystemExit(f"bench.compute: {exc}") from None
    for fig in found:
        print(json.dumps(fig.as_dict(), indent=1))


if __name__ == "__main__":
    main()
