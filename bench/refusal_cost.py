"""What bad input costs: the CPU seconds from a command to its one error line, beside a bare
`python -c pass`.

    python -m bench.refusal_cost [--full]

Why: a misspelt key is the commonest mistake, and its answer should come at once. It came after
5.8 CPU-s, because torch (4.2 CPU-s alone) and the node runtime were imported before the
request was checked; the checks need neither (issue 45). Each row is one refusal a user meets,
run as a user runs it, from the repository root, with a misspelt config key (the protocol name
for `schema`, which takes no config):

- run: `dfl-launch --topology ring20 --protocol d-psgd --set hyper.lrr=0.1`
- plan: `dfl-launch plan` with the same request
- sweep: `dfl-launch sweep SWEEP.yaml` whose settings hold `lrr: 0.1`
- schema: `dfl-launch schema --protocol d-psdg`
- python: `dfl_mesh.run("ring20", "d-psgd", lrr=0.1)` raising InputError
- import: `python -c "import dfl_mesh"`, no refusal: what every script pays first

Every command first runs once untimed, with the bytecode of what it imports written to a cache
of the bench's own (PYTHONPYCACHEPREFIX, so the checkout gets no __pycache__): timed, each costs
what it does on an installed or once-run checkout, not the compiling of every module that a
PYTHONDONTWRITEBYTECODE environment would add to each run (about 1 CPU-s here). The figure
is the child's user + system CPU seconds (its own and its waited-for children's:
`resource.getrusage(RUSAGE_CHILDREN)` around it), not wall time, which a shared machine's load
stretches; the reference is `python -c pass` measured in turn with it (bench/figures.py:
interleaved repetitions). Goal: at most LIMIT_S more than the bare interpreter. A row whose
command does not refuse as expected (another exit code, another line) fails the group: its
figure would time something else.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.figures import Figure, Mode, interleaved, median, module_main
from bench.launch import ROOT

GROUP = "refusal"
LIMIT_S = 0.5  # CPU-s over `python -c pass` that a refusal may cost
REFERENCE = "python -c pass"
QUICK = Mode(reps=5, rounds=0, note="quick: 5 interleaved repetitions")
FULL = Mode(reps=15, rounds=0, note="full: 15 interleaved repetitions")
TYPO = ("--topology", "ring20", "--protocol", "d-psgd", "--set", "hyper.lrr=0.1")
MEANT = "hyper.lrr: unknown key (did you mean lr?)"
BARE_MEANT = "lrr: unknown key (did you mean hyper.lr?)"
API_RUN = """\
import dfl_mesh
try:
    dfl_mesh.run("ring20", "d-psgd", out={out!r}, lrr=0.1)
except dfl_mesh.InputError as exc:
    raise SystemExit(f"InputError: {{exc}}")
"""


@dataclass(frozen=True)
class Case:
    """A command, the exit code it must end with and a text its stderr must hold."""

    name: str
    argv: list[str]
    code: int
    says: str


def cases(work: Path) -> list[Case]:
    launch = [sys.executable, "-m", "launcher.entry"]  # what the `dfl-launch` script runs
    sweep = work / "SWEEP.yaml"
    sweep.write_text(f"protocols: [d-psgd]\ntopologies: [ring20]\nsettings: {{lrr: 0.1}}\n"
                     f"out: {work / 'sweep'}\n")
    return [
        Case("run", [*launch, *TYPO, "--out", str(work / "run")], 2, MEANT),
        Case("plan", [*launch, "plan", *TYPO, "-o", str(work / "plan.json")], 2, MEANT),
        Case("sweep", [*launch, "sweep", str(sweep)], 2, BARE_MEANT),
        Case("schema", [*launch, "schema", "--protocol", "d-psdg"], 2, "unknown protocol"),
        Case("python", [sys.executable, "-c", API_RUN.format(out=str(work / "api"))], 1,
             f"InputError: --set lrr=0.1: {BARE_MEANT}"),
        Case("import", [sys.executable, "-c", "import dfl_mesh"], 0, ""),
    ]


def cached_bytecode(cache: Path) -> dict[str, str]:
    """The environment of a command whose compiled modules are kept in `cache`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": str(cache)}


def cpu_seconds(argv: list[str], env: dict[str, str], code: int = 0, says: str = "") -> float:
    """User + system CPU seconds of running `argv` to its end; SystemExit when it does not end
    with `code` or its stderr lacks `says`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != code or says not in proc.stderr:
        raise SystemExit(f"bench.refusal_cost: {' '.join(argv[1:])}: exit {proc.returncode}, "
                         f"not {code} with {says!r}\n{proc.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def timed(case: Case, env: dict[str, str]) -> Callable[[], float]:
    return lambda: cpu_seconds(case.argv, env, case.code, case.says)


def figures(quick: bool = True) -> list[Figure]:
    mode = QUICK if quick else FULL
    with tempfile.TemporaryDirectory(prefix="bench-refusal-") as tmp:
        measured = cases(Path(tmp))
        env = cached_bytecode(Path(tmp) / "pycache")
        runs = {REFERENCE: lambda: cpu_seconds([sys.executable, "-c", "pass"], env),
                **{case.name: timed(case, env) for case in measured}}
        interleaved(runs, 1)  # the warm-up: every module's bytecode into the cache
        samples = interleaved(runs, mode.reps)
    bare = median(samples[REFERENCE])
    found = []
    for case in measured:
        value = median(samples[case.name])
        over = value - bare
        what = "import dfl_mesh" if case.name == "import" else f"{case.name}: to the error line"
        found.append(Figure(
            GROUP, f"{what}, CPU-s", value, "s", REFERENCE, bare, value / bare,
            f"<= +{LIMIT_S:g} s", over <= LIMIT_S, mode.reps, mode.note,
            {"over_bare_s": round(over, 3), "max_s": max(samples[case.name]),
             "command": " ".join(case.argv[1:]) if case.name != "python" else "dfl_mesh.run"}))
    return found


if __name__ == "__main__":
    module_main(figures, __doc__, FULL.note)
