"""Bad input is refused before torch is imported (issue 45): the checks of a request (its
topology, config keys and values, protocol name) need none of torch's seconds, so neither
`dfl-launch` (a run, `plan`, `sweep`, `schema`) nor `dfl_mesh.run` imports it before saying
what is wrong, and `import dfl_mesh` does not import it at all: torch loads when a run starts.
Nor the node runtime's numpy and ZeroMQ: a request that names one protocol loads that
protocol's declaration alone, and an unknown name loads every declaration, to list them, none of
which imports numpy (their settings live apart from the algorithms); `import dfl_mesh` imports
no launcher and no pydantic.

Each case runs in a fresh interpreter, since the suite's own process has torch imported by
other tests. The commands are run whole with PYTHONPROFILEIMPORTTIME, which lists every module
the process imports, so that an import anywhere on the way to the error line is seen; the cases
of tests/test_config_typos.py, all of them, are replayed in one interpreter that looks at
sys.modules at each refusal. What a refusal costs in CPU seconds is bench/refusal_cost.py's
figure, not a test's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = "torch"
RUNTIME = {"numpy", "zmq"}  # the node runtime's, which no check of a request needs
TYPO = ["--topology", "ring20", "--protocol", "d-psgd", "--set", "hyper.lrr=0.1"]
MEANT = "hyper.lrr: unknown key (did you mean lr?)"


def run(argv: list[str]) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """`argv` run to its end from the repository root; the modules it imported (the top-level
    packages), read from its import-time profile."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    modules = {line.rsplit("|", 1)[1].strip().split(".")[0]
               for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "launcher" in modules or "dfl_mesh" in modules, proc.stderr[-2000:]  # profiled
    return proc, modules


def said(proc: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in proc.stderr.splitlines() if not line.startswith("import time:")]


def dfl_launch(*args: str) -> list[str]:
    return [sys.executable, "-m", "launcher.cli", *args]


def sweep_file(tmp_path: Path) -> str:
    path = tmp_path / "SWEEP.yaml"
    path.write_text(f"protocols: [d-psgd]\ntopologies: [ring20]\nsettings: {{lrr: 0.1}}\n"
                    f"out: {tmp_path / 'sweep'}\n")
    return str(path)


COMMANDS = {
    "run": (lambda tmp: dfl_launch(*TYPO, "--out", str(tmp / "run")), MEANT),
    "plan": (lambda tmp: dfl_launch("plan", *TYPO, "-o", str(tmp / "plan.json")), MEANT),
    "sweep": (lambda tmp: dfl_launch("sweep", sweep_file(tmp)),
              "d-psgd ring20 seed 0: --set lrr=0.1: lrr: unknown key (did you mean hyper.lr?)"),
    "schema": (lambda tmp: dfl_launch("schema", "--protocol", "d-psdg"),
               "--protocol: unknown protocol 'd-psdg'"),
    "resume": (lambda tmp: dfl_launch("--resume", str(tmp / "never-run")), "never-run"),
}


@pytest.mark.parametrize("command", COMMANDS)
def test_dfl_launch_refuses_bad_input_without_importing_torch(command: str,
                                                              tmp_path: Path) -> None:
    argv, says = COMMANDS[command]
    proc, modules = run(argv(tmp_path))
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = said(proc)
    assert len(lines) == 1 and says in lines[0], lines
    assert HEAVY not in modules
    assert not modules & RUNTIME, modules & RUNTIME
    assert not (tmp_path / "run").exists()


API_RUN = """\
import sys
import dfl_mesh
try:
    dfl_mesh.run("ring20", "d-psgd", out={out!r}, lrr=0.1)
except dfl_mesh.InputError as exc:
    print(exc, file=sys.stderr)
    print("torch" in sys.modules)
"""


def test_dfl_mesh_run_refuses_bad_input_without_importing_torch(tmp_path: Path) -> None:
    proc, modules = run([sys.executable, "-c", API_RUN.format(out=str(tmp_path / "run"))])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert said(proc) == ["--set lrr=0.1: lrr: unknown key (did you mean hyper.lr?)"]
    assert proc.stdout == "False\n"
    assert HEAVY not in modules
    assert not modules & RUNTIME, modules & RUNTIME
    assert not (tmp_path / "run").exists()


def test_import_dfl_mesh_does_not_import_torch() -> None:
    proc, modules = run([sys.executable, "-c", "import dfl_mesh"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not modules & {HEAVY, *RUNTIME, "pydantic", "launcher"}, modules


# Every case of tests/test_config_typos.py, each through dfl-launch's main as that file runs
# it, in one interpreter; one JSON line per case: its id, exit code and whether torch was
# imported when it was refused.
REPLAY = """\
import json
import sys
import tempfile
from pathlib import Path

from launcher.cli import main
from tests.test_config_typos import (
    BARE_KEYS, bare_key_args, cases, topology_cases, topology_typo_args, typo_args)


def refused(case, args):
    sys.argv = ["dfl-launch", *args]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code
    print(json.dumps([case, code, "torch" in sys.modules]))


for param in cases():
    with tempfile.TemporaryDirectory() as tmp:
        refused(param.id, typo_args(*param.values, Path(tmp))[0])
for what in topology_cases():
    with tempfile.TemporaryDirectory() as tmp:
        refused(what, topology_typo_args(what, Path(tmp))[0])
for given, _ in BARE_KEYS:
    with tempfile.TemporaryDirectory() as tmp:
        refused(given, bare_key_args(given, Path(tmp)))
"""


def test_every_misspelt_key_is_refused_without_importing_torch() -> None:
    from tests.test_config_typos import BARE_KEYS, cases, topology_cases

    proc = subprocess.run([sys.executable, "-c", REPLAY], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    replayed = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [case for case, _, _ in replayed] == [
        *(p.id for p in cases()), *topology_cases(), *(given for given, _ in BARE_KEYS)]
    assert [case for case, code, _ in replayed if code != 2] == []
    assert [case for case, _, torch in replayed if torch] == []



# What shows a run and ends it (its progress display, its finishing, a sweep's runner) serves a
# run that starts, not one refused: none is imported before the checks.
RUN_END = ("launcher.run.progress", "launcher.run.finish", "launcher.sweep.runner")
REFUSED_EVERYWHERE = """\
import sys
import dfl_mesh
from launcher.cli import main

RUN_END = {run_end!r}


def loaded():
    return [name for name in RUN_END if name in sys.modules]


try:
    dfl_mesh.run("ring20", "d-psgd", out={out!r}, lrr=0.1)
except dfl_mesh.InputError as exc:
    print("run", str(exc).endswith("(did you mean hyper.lr?)"), loaded())
try:
    dfl_mesh.sweep({file!r})
except dfl_mesh.InputError as exc:
    print("sweep", str(exc).endswith("(did you mean hyper.lr?)"), loaded())
for argv in ({typo!r}, ["sweep", {file!r}]):
    sys.argv = ["dfl-launch", *argv]
    try:
        main()
    except SystemExit as exc:
        print(argv[0], exc.code, loaded())
"""


def test_a_refusal_imports_nothing_that_shows_or_ends_a_run(tmp_path: Path) -> None:
    code = REFUSED_EVERYWHERE.format(run_end=RUN_END, out=str(tmp_path / "run"),
                                     file=sweep_file(tmp_path), typo=TYPO)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == ["run True []", "sweep True []", "--topology 2 []",
                                        "sweep 2 []"], proc.stderr[-2000:]
    assert not (tmp_path / "run").exists() and not (tmp_path / "sweep").exists()


ENTRY_SETTING = """
import os
import launcher.cli
launcher.cli.main = lambda: print(os.environ.get("PYDANTIC_DISABLE_PLUGINS"))
from launcher.entry import main
main()
"""


@pytest.mark.parametrize(("users", "seen"), [(None, "__all__"), ("logfire", "logfire")])
def test_dfl_launch_skips_pydantics_plugin_scan_unless_the_user_says(users: str | None,
                                                                     seen: str) -> None:
    """The command's entry sets pydantic's plugin switch before the command line loads (its
    scan of every installed distribution is CPU paid before a refusal); a user's own setting
    stands, and a program importing the launcher is not touched."""
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if users is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = users
    proc = subprocess.run([sys.executable, "-c", ENTRY_SETTING], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == seen, proc.stderr[-2000:]
    imported = subprocess.run([sys.executable, "-c", "import os, launcher.cli; "
                               "print(os.environ.get('PYDANTIC_DISABLE_PLUGINS'))"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert imported.stdout.strip() == str(users)
