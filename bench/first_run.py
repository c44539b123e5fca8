"""A first run of every protocol: `dfl-launch --topology T --protocol P`, nothing else, shows
progress within 30 s and ends within 10 minutes on a 2-core machine.

    python -m bench.first_run [--full] [--only ssd-fl,dsc,...] [--topology T] [--config FILE]

Why: a user's first command is the protocol's defaults; a default that evaluates only after
minutes, or needs hours, reads as a hang. The paper's full settings stay one `--config` away
(e.g. protocols/configs/ssd-fl-paper.yaml).

For each registered protocol the group starts its default job as a user does (its run defaults,
no `--rounds`) on its first-run topology (`topology_of`): the README's, ring20; er30 for the
ssd-fl family (30 devices, the paper's network size); rgg10 for the DSC family (its mini run),
with stdout a pipe, where the launcher prints each evaluation as its JSON line. It reads, from
the lines' arrival times:

- first progress: seconds from starting the command to its first line (start-up, data, the
  pre-phase and the rounds up to the first evaluation: what the user waits for);
- seconds per round: between the first lines of two evaluations, over the rounds between them,
  so the evaluation and every wait of a round count.

It then stops the run as Ctrl-C does (a whole default job costs minutes; 15 of them would cost
the suite an hour) and estimates the job: first progress + (rounds - first evaluated round) x
seconds per round. A job that ends while watched is its measured time. Goals, one row each:
first progress <= 30 s, the estimate <= 10 minutes. Quick mode watches two evaluations at least
2 rounds apart (fewer when the job has fewer), at most 150 s per protocol (`Watch`); an estimate
from a watch that ended before the second evaluation is a lower bound and fails its goal.
Data caches are whatever the machine has (the suite's other groups warm Fashion-MNIST's).
`python -m bench --quick` watches the README's first run alone (SHORT), and its row says so:
15 protocols took about 16 minutes.
`--config FILE` watches the jobs with FILE layered over the defaults, e.g. a paper's settings
(protocols/configs/ssd-fl-paper.yaml: the ssd-fl family's defaults before the quick first run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.figures import Figure, not_measured, table
from bench.launch import ROOT, last_words

GROUP = "first_run"
TOPOLOGY = "ring20"  # the README's first run
SHORT = "d-psgd"  # the README's first run's protocol: the one a quick suite watches
# Families whose docs run them elsewhere first: SSD-FL's paper works with 30 devices; DSC's mini
# run (docs/protocols/dsc.md#mini-run) is rgg10, and its 800 training scenes do not split
# Dirichlet(1) with 30 per node over 20 nodes.
TOPOLOGIES = {"ssd-fl": "er30", "sdfl": "er30", "pdfl": "er30", "stc": "er30", "cstc": "er30",
              "dsc": "rgg10", "dsc-noagg": "rgg10", "dsc-fedavg": "rgg10", "dsc-max": "rgg10",
              "dsc-fedamp": "rgg10"}
PROGRESS_GOAL_S = 30.0
JOB_GOAL_S = 600.0
STOP_GRACE_S = 30.0  # from SIGINT to SIGKILL of the run's process group


@dataclass(frozen=True)
class Watch:
    """How long one protocol's default job is watched: at least `span` rounds past the first
    evaluation (and a second evaluation), at most `limit_s` seconds from the command."""

    span: int
    limit_s: float
    note: str


QUICK = Watch(span=2, limit_s=150.0, note="quick: >= 2 rounds past the first evaluation")
FULL = Watch(span=10, limit_s=600.0, note="full: >= 10 rounds past the first evaluation")


@dataclass
class Watched:
    """What one watched default job showed: the arrival time (seconds from the command) of the
    first line of each evaluated round, and how it ended."""

    rounds: int
    eval_every: int
    arrivals: dict[int, float] = field(default_factory=dict)
    ended_s: float | None = None  # the job ended by itself (its whole time), else None
    exit_code: int | None = None
    stderr_tail: str = ""
    load: float = 0.0  # the machine's 1-minute load average when the watch ended: on a shared
    # machine it says how much of a slow round is the others' work

    @property
    def first_progress_s(self) -> float | None:
        return min(self.arrivals.values()) if self.arrivals else None

    def per_round_s(self, now_s: float) -> tuple[float | None, bool]:
        """Seconds per round and whether it is measured (False: a lower bound from the time
        since the first evaluation, with no second one seen)."""
        if not self.arrivals:
            return None, False
        first = min(self.arrivals)
        last = max(self.arrivals)
        if last > first:
            return (self.arrivals[last] - self.arrivals[first]) / (last - first), True
        after = min(self.eval_every, self.rounds - first) or 1
        return (now_s - self.arrivals[first]) / after, False

    def estimate_s(self, now_s: float) -> tuple[float | None, bool]:
        """The default job's seconds and whether it is measured rather than a lower bound."""
        if self.ended_s is not None and self.exit_code == 0:
            return self.ended_s, True
        per_round, measured = self.per_round_s(now_s)
        if per_round is None:
            return None, False
        first = min(self.arrivals)
        return self.arrivals[first] + (self.rounds - first) * per_round, measured


def defaults(protocol: str, config_file: Path | None = None) -> tuple[int, int]:
    """The default job's rounds and eval_every (with `config_file` over the defaults), resolved
    as the launcher resolves them."""
    from launcher.config.layers import resolve_config  # torch: only when a job is measured

    config = resolve_config(protocol, config_file, {}, ())
    return int(config["rounds"]), int(config["eval_every"])


def watch(protocol: str, topology: str, run_dir: Path, mode: Watch,
          config_file: Path | None = None) -> tuple[Watched, float]:
    """Start the default job with stdout a pipe, read its JSON lines until the watch is done,
    stop it as Ctrl-C does; what it showed, and the seconds watched."""
    rounds, eval_every = defaults(protocol, config_file)
    seen = Watched(rounds, eval_every)
    command = [sys.executable, "-m", "launcher.cli", "--topology", topology, "--protocol",
               protocol, "--out", str(run_dir), "--no-plots"]
    if config_file is not None:
        command += ["--config", str(config_file)]
    stderr_path = run_dir.with_suffix(".stderr")
    lines: queue.SimpleQueue[tuple[float, str | None]] = queue.SimpleQueue()
    started = time.monotonic()
    with stderr_path.open("w") as stderr:
        # a session of its own: the run's nodes are its children, and a stop must reach them all
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr,
                                text=True, start_new_session=True)

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put((time.monotonic() - started, line))
            lines.put((time.monotonic() - started, None))

        threading.Thread(target=read, name=f"first-run-{protocol}", daemon=True).start()
        now = 0.0
        try:
            while True:
                left = mode.limit_s - (time.monotonic() - started)
                if left <= 0 or done_watching(seen, mode):
                    break
                try:
                    now, line = lines.get(timeout=left)
                except queue.Empty:
                    break
                if line is None:
                    seen.exit_code = proc.wait()
                    seen.ended_s = now
                    break
                evaluated = parse(line)
                if evaluated is not None:
                    if not seen.arrivals:  # the mesh runs: a stop from now on must reach it
                        print(f"bench: first_run: {protocol} on {topology}: round {evaluated} "
                              f"evaluated after {now:.1f} s", file=sys.stderr, flush=True)
                    seen.arrivals.setdefault(evaluated, now)
            now = time.monotonic() - started
        finally:
            stop(proc)
    seen.stderr_tail = stderr_path.read_text(errors="replace")[-2000:]
    seen.load = os.getloadavg()[0]
    return seen, now


def parse(line: str) -> int | None:
    """The round of an evaluation's JSON line, or None (the run's last line, anything else)."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    found = record.get("round") if isinstance(record, dict) else None
    return found if isinstance(found, int) else None


def done_watching(seen: Watched, mode: Watch) -> bool:
    """Two evaluations seen, `span` rounds apart at least (fewer when the job has fewer)."""
    if len(seen.arrivals) < 2:
        return False
    first, last = min(seen.arrivals), max(seen.arrivals)
    return last - first >= min(mode.span, seen.rounds - first)


def stop(proc: subprocess.Popen[str]) -> None:
    """Ctrl-C to the launcher (it stops its nodes and writes its run directory), then, after
    STOP_GRACE_S, SIGKILL to whatever of its session is left."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(STOP_GRACE_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def figures_of(protocol: str, topology: str, seen: Watched, watched_s: float,
               mode: Watch) -> list[Figure]:
    """One protocol's two rows: its first progress against 30 s, and its default job's
    estimated minutes against 10 (met only when the estimate is measured, not a lower bound)."""
    first = seen.first_progress_s
    estimate, measured = seen.estimate_s(watched_s)
    per_round, _ = seen.per_round_s(watched_s)
    extra: dict[str, float | str] = {
        "topology": topology, "rounds": float(seen.rounds), "eval_every": float(seen.eval_every),
        "watched_s": round(watched_s, 1),
        "evaluated_rounds": ", ".join(str(r) for r in sorted(seen.arrivals)),
        "load_1min": round(seen.load, 1)}
    if per_round is not None:
        extra["round_s"] = round(per_round, 3)
    if seen.exit_code not in (None, 0):
        extra["error"] = last_words(seen.stderr_tail)
    how = ("measured whole" if seen.ended_s is not None and seen.exit_code == 0 else
           "first progress + rounds x s per round" if measured else
           "lower bound: no second evaluation while watched")
    progress = Figure(
        GROUP, f"{protocol}: first progress ({topology})", first, "s", "30-s goal",
        PROGRESS_GOAL_S, None if first is None else first / PROGRESS_GOAL_S, "<= 1",
        first is not None and first <= PROGRESS_GOAL_S, 1,
        "" if first is not None else f"no evaluation within {watched_s:.0f} s", extra)
    minutes = None if estimate is None else estimate / 60
    goal_min = JOB_GOAL_S / 60
    job = Figure(
        GROUP, f"{protocol}: default job, {seen.rounds} rounds ({topology})", minutes, "min",
        "10-min goal", goal_min, None if minutes is None else minutes / goal_min, "<= 1",
        minutes is not None and measured and minutes <= goal_min, 1, f"{how}; {mode.note}")
    return [progress, job]


def protocols() -> list[str]:
    from protocols.registry import PROTOCOLS

    return sorted(PROTOCOLS)


def measure(names: list[str], topology: str | None, quick: bool,
            config_file: Path | None = None) -> list[Figure]:
    """Each protocol's two rows, on `topology` (None: each one's first-run topology)."""
    mode = QUICK if quick else FULL
    found: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="dfl-bench-first-run-") as tmp:
        for name in names:
            where = topology or topology_of(name)
            print(f"bench: first_run: {name} on {where} ...", file=sys.stderr, flush=True)
            seen, watched_s = watch(name, where, Path(tmp) / name, mode, config_file)
            found += figures_of(name, where, seen, watched_s, mode)
    return found


def topology_of(protocol: str) -> str:
    return TOPOLOGIES.get(protocol, TOPOLOGY)


def figures(quick: bool, whole: bool = True) -> list[Figure]:
    """Every protocol's rows; without `whole` (the quick suite's short part) the README's first
    run's (SHORT) and a row for the others."""
    if whole:
        return measure(protocols(), None, quick)
    others = len(protocols()) - 1
    return [*measure([SHORT], None, quick), not_measured(
        GROUP, "skipped", f"--full only (or --only first_run): the first run of the {others} "
                          "other protocols (about a minute each)")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="watch 10 rounds, up to 10 minutes")
    parser.add_argument("--only", default="", help="comma-separated protocols (default: all)")
    parser.add_argument("--topology", default=None,
                        help=f"every job's (default: {TOPOLOGY}; ssd-fl's er30, dsc's rgg10)")
    parser.add_argument("--config", type=Path, default=None,
                        help="a config file layered over each protocol's defaults")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or protocols()
    config = args.config.absolute() if args.config is not None else None  # the launcher's cwd
    found = measure(names, args.topology, not args.full, config)
    print(table(found))
    print(json.dumps([fig.as_dict() for fig in found], indent=1))


if __name__ == "__main__":
    main()
