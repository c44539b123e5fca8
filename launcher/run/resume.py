"""`dfl-launch --resume RUN_DIR`: continue a stopped or killed run where all its nodes were.

A launch records what the user asked for (`inputs.json`: topology, protocol, config file,
options, `--set`s). Resuming resolves those inputs again, exactly as the first launch did, and
compares the new plan with the run's `plan.json` section by section, addresses aside (the new
launch claims fresh ports): an edited topology file, config file or protocol defaults, or other
data, is bad input (exit 2) naming the sections that changed.

Then every node's checkpoint file of the newest complete round is checked, before any node
starts (dfl_node/state/checkpoint_check.py: its digest, its node, its round, its plan). Each
refused file is one line naming the node, the round and the file. The run's `on_corrupt`
policy decides what follows: `stop` refuses to resume (exit 2, nothing in the directory
touched); `fallback` sets the refused files aside (renamed `*.refused`, so that no later
resume counts them, and kept for a look) and resumes from the newest round every node holds
intact, saying so in one line. Nodes keep two complete rounds for this
(checkpoint_layout.KEPT_ROUNDS); with none intact the run starts over.

The run then continues from that round: rows of later rounds are cut from `metrics.jsonl` and
`cycles.jsonl` (the resumed nodes report them again), the nodes are told the round and each
one's digest (`checkpoints/resume.json`: a node refuses a file that changed since), and the
pre-phase's result is not computed again: `prephase.json` stays, and each node's answer is in
its checkpoint. With no complete checkpoint the run starts over in the same directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dfl_node.plan import PlanError, RunPlan
from dfl_node.state import checkpoint_layout as checkpoint
from dfl_node.state.checkpoint_check import Checked, OnCorrupt, check_rounds, set_aside
from launcher.config.given import OBJECTS_KEY
from launcher.config.run_spec import RunSpec
from launcher.errors import LaunchError
from launcher.logs import launcher_logger

INPUTS_FILE = "inputs.json"
# inputs.json: the resources and collector host a Slurm run asked for (launcher/slurm/submit.py)
SLURM_KEY = "slurm"
REPORTED_FILES = ("metrics.jsonl", "cycles.jsonl")
LOG = launcher_logger("resume")


def record_inputs(run_dir: Path, req: RunSpec) -> None:
    (run_dir / INPUTS_FILE).write_text(json.dumps(req.recorded(), indent=1, sort_keys=True)
                                       + "\n")


def recorded_inputs(run_dir: Path) -> dict[str, Any] | None:
    """The inputs a run directory was launched with, as JSON (None: no readable record)."""
    try:
        body = json.loads((run_dir / INPUTS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return body if isinstance(body, dict) else None


def slurm_inputs(run_dir: Path) -> dict[str, Any] | None:
    """What a Slurm run in `run_dir` asked Slurm for (None: not a Slurm run). Here, not in
    launcher/slurm/, because a local sweep must tell such a run from its own (sweep/runner.py)
    and launcher/slurm/sweep.py builds on that runner."""
    body = recorded_inputs(run_dir)
    found = body.get(SLURM_KEY) if body is not None else None
    return found if isinstance(found, dict) else None


def resume_request(run_dir: Path, on_corrupt: str | None = None) -> RunSpec:
    """The spec the run in `run_dir` was launched with, its `on_corrupt` replaced where
    given; LaunchError if it has none, or if it was handed Python objects (only a description
    of them is recorded: launcher/config/given.py)."""
    path = run_dir / INPUTS_FILE
    try:
        body = json.loads(path.read_text())
    except FileNotFoundError:
        raise LaunchError(f"--resume {run_dir}: not a run directory ({path} is missing)") from None
    except (OSError, ValueError) as exc:
        raise LaunchError(f"{path}: unreadable: {exc}") from None
    if isinstance(body, dict) and isinstance(body.get(OBJECTS_KEY), dict):
        raise LaunchError(f"--resume {run_dir}: the run was handed Python objects "
                          f"({', '.join(body[OBJECTS_KEY])}), which its files do not hold; "
                          "run it again with the same objects")
    try:
        if on_corrupt is not None:
            body["options"] = {**body["options"], "on_corrupt": on_corrupt}
        return RunSpec.from_record(body)
    except (ValueError, KeyError, TypeError, LaunchError) as exc:
        raise LaunchError(f"{path}: unreadable: {exc}") from None


def prepare_resume(run_dir: Path, plan: RunPlan, req: RunSpec, on_corrupt: OnCorrupt) -> int:
    """Check that `plan` (the inputs resolved again) is the run's own and its checkpoints
    intact (`on_corrupt` decides what a refused file means), cut the reported rows after the
    resume round, tell the nodes; the round to resume after (0: from scratch)."""
    changed = changed_sections(load_old_plan(run_dir), plan)
    if changed:
        raise LaunchError(f"--resume {run_dir}: the inputs changed since the run started: "
                          f"{', '.join(describe(name, req) for name in changed)}; "
                          "refusing to resume")
    checked = check_rounds(run_dir, plan.ids, checkpoint.content_hashes(plan))
    if checked.refused:
        apply_on_corrupt(run_dir, checked, on_corrupt)
    round_ = checked.point.round
    for name in REPORTED_FILES:
        keep_rounds_through(run_dir / name, round_)
    restore_last_rows(run_dir / "metrics.jsonl", run_dir, plan, round_)
    checkpoint.set_resume_point(run_dir, checked.point)
    return round_


def apply_on_corrupt(run_dir: Path, checked: Checked, on_corrupt: OnCorrupt) -> None:
    """Refused checkpoint files: under `stop` one line and exit 2, the directory untouched;
    under `fallback` one line per file, each set aside, and one for the round resumed from."""
    round_ = checked.point.round
    target = (f"round {round_}, the newest round every node holds intact" if round_
              else "round 0: no round is held intact by every node, the run starts over")
    if on_corrupt == "stop":
        first, *more = checked.refused
        plural = "s" if len(more) > 1 else ""
        others = f" (and {len(more)} more refused file{plural})" if more else ""
        raise LaunchError(f"--resume {run_dir}: {first}{others}; refusing to resume "
                          f"(on_corrupt: stop; --on-corrupt fallback resumes from {target})")
    for refused in checked.refused:
        LOG.warning("--resume %s: %s; set aside as %s", run_dir, refused,
                    set_aside(refused).name)
    LOG.warning("--resume %s: resuming from %s (on_corrupt: fallback)", run_dir, target)


def restore_last_rows(path: Path, run_dir: Path, plan: RunPlan, round_: int) -> None:
    """The metrics rows of round `round_` that nodes sent but the launcher never wrote (the
    run was killed between a node's record and its arrival; the checkpoint, written after the
    record was sent, holds it): the resumed nodes start after that round and do not send them
    again."""
    if round_ == 0:
        return
    # every line left is a JSON object with its round (keep_rounds_through kept no other)
    lines = path.read_text().splitlines() if path.is_file() else []
    written = {(row["round"], row.get("node")) for row in map(json.loads, lines)}
    missing = []
    for node in plan.clients:
        if (round_, node) in written:
            continue
        record = checkpoint.runtime_of(checkpoint.checkpoint_path(run_dir, node, round_)).get(
            "last") or {}
        if record.get("round") == round_ and record.get("node") == node:
            missing.append({k: v for k, v in record.items() if k != "type"})
    if missing:
        with path.open("a", encoding="utf-8") as out:
            out.writelines(json.dumps(row, sort_keys=True) + "\n" for row in missing)


def reset_run_dir(run_dir: Path, req: RunSpec) -> int:
    """A new run in `run_dir`: no old checkpoint may be resumed from, no old row is kept, and
    the inputs are recorded for a later `--resume`; the round it starts after, 0."""
    checkpoint.clear(run_dir)
    for name in REPORTED_FILES:
        (run_dir / name).unlink(missing_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    record_inputs(run_dir, req)
    return 0


def load_old_plan(run_dir: Path) -> RunPlan:
    try:
        return RunPlan.load(run_dir / "plan.json")
    except PlanError as exc:
        raise LaunchError(f"--resume {run_dir}: {exc}") from None


def changed_sections(old: RunPlan, new: RunPlan) -> list[str]:
    before, after = checkpoint.content_hashes(old), checkpoint.content_hashes(new)
    return [name for name in after if before.get(name) != after[name]]


def describe(section: str, req: RunSpec) -> str:
    """A changed section, with the input file it comes from where there is one."""
    if section == "topology":
        return f"topology ({req.topology})"
    if section == "protocol" and req.config_file:
        return f"protocol (config {req.config_file} or the {req.protocol} defaults)"
    return section


def keep_rounds_through(path: Path, round_: int) -> None:
    """Drop the JSON lines of rounds after `round_` (and a torn last line), atomically. From
    scratch (`round_` 0) no line stays: the nodes evaluate their untrained models again when
    `eval_at_start` asks for round 0."""
    if not path.is_file():
        return
    kept = [line for line in path.read_text().splitlines(keepends=True)
            if round_ > 0 and (reported := reported_round(line)) is not None and reported <= round_]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(kept))
    tmp.replace(path)


def reported_round(line: str) -> int | None:
    try:
        row: Any = json.loads(line)
    except ValueError:
        return None
    value = row.get("round") if isinstance(row, dict) else None
    return value if isinstance(value, int) else None
