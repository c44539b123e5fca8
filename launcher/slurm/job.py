"""What a Slurm job of a plan asks for, and the batch script that asks for it.

One task per node of the plan, all in one job step (`srun`, the task's rank to its node id) or
each its own step, so the mesh spans whatever hosts Slurm gives, and the nodes find each other
through the directory beside the collector (`endpoints.nodes: discover`). Everything the job
requests follows from the plan and a few options, each with a default here, and the options are
checked before any script is written: a typo in a time limit should be exit 2 on the submit
host, not a job that sbatch refuses later. Kept free of any call to Slurm, so a script can be
written and tested where no cluster is.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

from dfl_node.plan import RunPlan
from launcher.errors import LaunchError

DEFAULT_TIME = "01:00:00"
DEFAULT_CPUS_PER_TASK = 1
# sbatch's forms: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
TIME_FORMS = re.compile(r"\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+(:\d{1,2}){0,2}")
MEMORY = re.compile(r"[1-9]\d*[KMGT]?")
# What Slurm accepts in a partition or account name, short of anything a shell would read.
NAME = re.compile(r"[A-Za-z0-9_.+-]+")


@dataclass(frozen=True)
class Resources:
    """What one job asks Slurm for besides its tasks (one per node of the plan)."""

    cpus_per_task: int = DEFAULT_CPUS_PER_TASK
    mem_per_cpu: str | None = None  # a Slurm size (4096, 4G); None: the cluster's default
    time: str = DEFAULT_TIME
    partition: str | None = None  # None: the cluster's default partition
    account: str | None = None  # None: the user's default account
    gpus_per_task: int = 0  # each node uses the first, cuda:0 as its task sees it
    step_per_node: bool = False  # a job step per node, not one step of all (batch_script)

    def check(self) -> None:
        """Each option as Slurm would take it, or a LaunchError naming the first that is not."""
        if self.gpus_per_task < 0:
            raise LaunchError(f"--gpus-per-task: must be 0 or more, got {self.gpus_per_task}")
        if self.cpus_per_task < 1:
            raise LaunchError(f"--cpus-per-task: must be at least 1, got {self.cpus_per_task}")
        if not TIME_FORMS.fullmatch(self.time):
            raise LaunchError(f"--time: expected minutes, HH:MM:SS or D-HH:MM:SS, got "
                              f"{self.time!r}")
        if self.mem_per_cpu is not None and not MEMORY.fullmatch(self.mem_per_cpu):
            raise LaunchError(f"--mem-per-cpu: expected a size such as 4096 or 4G (megabytes "
                              f"unless K, M, G or T), got {self.mem_per_cpu!r}")
        for flag, value in (("--slurm-partition", self.partition), ("--account", self.account)):
            if value is not None and not NAME.fullmatch(value):
                raise LaunchError(f"{flag}: not a Slurm name: {value!r}")


def task_ids(plan: RunPlan) -> list[int]:
    """The nodes that run as Slurm tasks: all but a server-based protocol's aggregator, which
    listens at a fixed address on the submit host (`endpoints.aggregator`), where `--submit`
    runs it beside the collector. The aggregator is a node beyond the topology's, so these are
    exactly the topology's nodes."""
    return [i for i in plan.ids if i != plan.aggregator]


@dataclass(frozen=True)
class JobShape:
    """What the batch script needs of a run: its name, its tasks and what runs beside them on
    the submit host. All but the last follow from the topology file and the protocol's name,
    so `--submit` can queue the job before it resolves the plan (launcher/slurm/queue.py)."""

    name: str
    tasks: tuple[int, ...]
    services: tuple[tuple[str, ...], ...] = ()  # each a command line for the submit host

    @classmethod
    def of(cls, plan: RunPlan, plan_path: Path, run_dir: Path) -> JobShape:
        return cls(job_name(plan.protocol, plan.topology_name), tuple(task_ids(plan)),
                   tuple(tuple(argv) for argv in services_by_hand(plan, plan_path, run_dir)))


def check_fits(tasks: int, resources: Resources, partition: str, cpus: int) -> None:
    """Refuse a run whose `tasks` cannot all run at once on `partition` (`cpus` CPUs in all):
    the nodes of a mesh wait for each other, so a job that Slurm would start part by part
    would never finish."""
    need = tasks * resources.cpus_per_task
    if need > cpus:
        raise LaunchError(f"the run needs {tasks} tasks x {resources.cpus_per_task} "
                          f"CPU(s) = {need} CPUs at once; partition {partition} has {cpus} "
                          "(fewer nodes, or a smaller --cpus-per-task)")


def job_name(protocol: str, topology: str) -> str:
    return f"dfl-{protocol}-{topology}"


STEPS_DIR = "steps"  # DIR/steps/node-<id>.exit: each node's exit status
SCRIPT = "job.sh"
PLAN = "plan.json"
READY = "plan.ready"  # in STEPS_DIR: the plan is written, the job's hosts may go


def ready_file(run_dir: Path) -> Path:
    """Made once the run's plan is written; cleared with the steps' statuses before a job is
    queued, so that a queued job never starts nodes from the plan of a run before it (which
    `--resume` reads while the new job's hosts warm up)."""
    return run_dir / STEPS_DIR / READY


def exit_file(run_dir: Path, node_id: int) -> Path:
    return run_dir / STEPS_DIR / f"node-{node_id}.exit"


# The client a node's task runs (launcher/slurm/task_client.py), by path: it needs only
# what the interpreter has built in, so `python -S -I` skips site-packages.
HOST_CLIENT = Path(__file__).resolve().parent / "task_client.py"
PLAN_WAIT_S = 900  # how long a job queued before its plan waits for it (launcher/slurm/queue.py)
SERVER_KEY_HEX = 8  # of the run directory's digest: keeps the socket path within 108 bytes


def server_key(run_dir: Path) -> str:
    """The word that names a host's server socket (task_client.socket_path), for the shell to
    expand: the job's id and a digest of the run directory. The id alone is not enough where two
    clusters number their jobs alike and a host's /tmp is shared: two Slurm labs on one machine
    each ran job 1 on a host named n1, and the nodes of each forked from the other's server
    (measured: both jobs failed, their nodes given two directories' addresses)."""
    digest = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:SERVER_KEY_HEX]
    return f"$SLURM_JOB_ID-{digest}"


def node_command(python: str, plan_path: Path, run_dir: Path, forked: bool) -> list[str]:
    """What a node's task runs, its id appended: a client of the host's server that forks the
    node (`forked`), else `dfl-node --plan PLAN --out DIR --node-id`."""
    if forked:
        return [python, "-S", "-I", str(HOST_CLIENT), server_key(run_dir)]
    return [python, "-m", "launcher.node_cli", "--plan", str(plan_path), "--out", str(run_dir),
            "--node-id"]


def host_command(python: str, plan_path: Path, run_dir: Path) -> list[str]:
    """The step of one server per host that the nodes are forked from
    (launcher/slurm/host_server.py): over every host of the job, overlapping the nodes'
    steps, so it holds no CPU of theirs."""
    return ["srun", "--overlap", "--nodes=$SLURM_JOB_NUM_NODES", "--ntasks-per-node=1",
            "--ntasks=$SLURM_JOB_NUM_NODES", "--job-name=hosts", python, "-m",
            "launcher.slurm.host_server", "serve", str(plan_path), str(run_dir),
            server_key(run_dir)]


def shell_words(argv: list[str]) -> str:
    """`argv` quoted for the shell, the `$SLURM_...` words left for it to expand."""
    return " ".join(f'"{word}"' if word.startswith("$") or "=$" in word else shlex.quote(word)
                    for word in argv)


def step_options(resources: Resources) -> list[str]:
    """One task on one host with the job's per-task share and nothing more (`--exact`), so the
    steps of all nodes fit the allocation side by side."""
    return ["--ntasks=1", "--nodes=1", "--exact", *task_share(resources)]


def tasks_options(resources: Resources, tasks: int) -> list[str]:
    """The one step of every node: the allocation's tasks, each with its share."""
    return [f"--ntasks={tasks}", *task_share(resources)]


def task_share(resources: Resources) -> list[str]:
    """A task's CPUs and GPUs, given explicitly to every step: srun 22.05 does not take
    --cpus-per-task from the batch environment."""
    share = [f"--cpus-per-task={resources.cpus_per_task}"]
    if resources.gpus_per_task:
        share.append(f"--gpus-per-task={resources.gpus_per_task}")
    return share


def record_exit(steps: str, node: str) -> str:
    """The shell that writes `$s` as the node's exit status, atomically: `--submit` reads
    these files while the job runs."""
    return (f'echo "$s" > {steps}/"node-{node}.tmp" && '
            f'mv {steps}/"node-{node}.tmp" {steps}/"node-{node}.exit"')


def batch_script(shape: JobShape, resources: Resources, plan_path: Path, run_dir: Path,
                 python: str) -> str:
    """The sbatch script: the job's request in #SBATCH lines, then the nodes' step.

    By default one step of all tasks, each task the node at its rank (`SLURM_PROCID` indexes
    the plan's task ids): Slurm starts the whole mesh with one srun, one slurmstepd per host.
    Each task records its node's exit status in DIR/steps/node-<id>.exit, where `--submit`
    reads which node died as a local launcher reads its children's exit codes (and cancels the
    job, unless the run goes on without it: `--on-failure continue`); a task killed before it
    could (SIGKILL of the step) gets srun's status once the step has ended. Submitted by hand, a
    node's death still ends the job: its neighbours find it silent
    (dfl_node/transports/liveness.py) and stop.

    With `step_per_node`, each node is its own step (`srun` of one task): Slurm then cancels,
    accounts and reports every node apart (`scancel JOB.STEP` stops one node, sacct lists each),
    at Slurm's cost of a step (an srun, a step record and a slurmstepd) per node.

    The job may start before its plan is written (`--submit` queues it first): the host servers
    import and warm up meanwhile and then wait for `ready_file`, as a GPU job's steps do here."""
    lines = ["#!/bin/bash",
             f"#SBATCH --job-name={shape.name}",
             f"#SBATCH --ntasks={len(shape.tasks)}",
             f"#SBATCH --cpus-per-task={resources.cpus_per_task}",
             f"#SBATCH --time={resources.time}",
             f"#SBATCH --output={run_dir / 'slurm-%j.out'}"]
    if resources.gpus_per_task:
        lines.append(f"#SBATCH --gpus-per-task={resources.gpus_per_task}")
    if resources.mem_per_cpu is not None:
        lines.append(f"#SBATCH --mem-per-cpu={resources.mem_per_cpu}")
    if resources.partition is not None:
        lines.append(f"#SBATCH --partition={resources.partition}")
    if resources.account is not None:
        lines.append(f"#SBATCH --account={resources.account}")
    forked = not resources.gpus_per_task
    command = shell_words(node_command(python, plan_path, run_dir, forked))
    steps = shlex.quote(str(run_dir / STEPS_DIR))
    ids = " ".join(str(i) for i in shape.tasks)
    layout = "one job step per node" if resources.step_per_node else "one job step of all nodes"
    lines += [f"# Written by dfl-launch slurm: {layout} of the plan. The nodes learn each",
              "# other's addresses from the directory beside the collector, which",
              "# `dfl-launch slurm --submit` runs with the plan's other services. For this",
              "# script submitted by hand, run them on the submit host:",
              *[f"#   {shlex.join(argv)}" for argv in shape.services],
              f"mkdir -p {steps}"]
    if forked:
        lines += ["# One server per host imports the runtime once; each node's task forks its node",
                  "# from it (launcher/slurm/host_server.py).",
                  f"{shell_words(host_command(python, plan_path, run_dir))} &",
                  "hosts=$!"]
    else:
        ready = shlex.quote(str(ready_file(run_dir)))
        lines += [f"for _ in $(seq {PLAN_WAIT_S * 10}); do [ -e {ready} ] && break; "
                  "sleep 0.1; done"]
    if resources.step_per_node:
        lines += ["node() {",
                  f"    srun {' '.join(step_options(resources))} --job-name=\"node-$1\" \\",
                  f"        {command} \"$1\"",
                  f"    s=$?; {record_exit(steps, '$1')}",
                  "}",
                  "nodes=()",
                  f"for id in {ids}; do node \"$id\" & nodes+=($!); done",
                  'wait "${nodes[@]}"']
    else:
        # `trap :`: a signal Slurm sends the task reaches the node, and the task still
        # records how the node ended (a trap, unlike an ignored signal, is not inherited).
        task = (f"trap : TERM INT HUP; ids=({ids}); id=${{ids[$SLURM_PROCID]}}; "
                f"\"$@\" \"$id\"; s=$?; "
                f"{record_exit(steps, '$id')}; exit $s")
        lines += ["# Each task runs the node at its rank and records the node's exit status.",
                  f"srun {' '.join(tasks_options(resources, len(shape.tasks)))} "
                  "--job-name=nodes \\",
                  f"    bash -c {shlex.quote(task)} node \\",
                  f"    {command}",
                  "s=$?  # a task killed before it recorded its node's status: the step's",
                  f"for id in {ids}; do [ -e {steps}/\"node-$id.exit\" ] || "
                  f"{{ {record_exit(steps, '$id')}; }}; done"]
    if forked:  # SIGUSR1: srun passes it on, and the servers end (a SIGTERM would cancel)
        lines += ['kill -USR1 "$hosts" 2>/dev/null', 'wait "$hosts"']
    lines += ["# The job's exit status: 0 when every node exited 0.",
              f"! grep -qvx 0 {steps}/node-*.exit"]
    return "\n".join(lines) + "\n"


def prepare_run_dir(out: Path, resuming: bool = False) -> Path:
    """`out` made absolute (the tasks start elsewhere) and ready for a job: a directory that
    holds a run's results already is refused unless the run is resumed there, a written but
    unrun one reused; the steps' exit statuses of an earlier job go."""
    out = out.absolute()
    if not resuming and ((out / "summary.json").exists() or any((out / "final").glob("*"))):
        raise LaunchError(f"-o {out}: holds a run's results; pick another directory")
    (out / "final").mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / STEPS_DIR, ignore_errors=True)
    return out


def write_script(shape: JobShape, resources: Resources, run_dir: Path, python: str) -> Path:
    """RUN_DIR/job.sh, for the plan at RUN_DIR/plan.json."""
    script = run_dir / SCRIPT
    script.write_text(batch_script(shape, resources, run_dir / PLAN, run_dir, python))
    return script


def collector_by_hand(plan_path: Path, run_dir: Path) -> list[str]:
    """The collector (with the directory) on the submit host: every plan has it."""
    return ["dfl-launch", "collect", "--plan", str(plan_path), "--out", str(run_dir)]


def services_by_hand(plan: RunPlan, plan_path: Path, run_dir: Path) -> list[list[str]]:
    """What runs on the submit host besides the job: the collector, the pre-phase's
    coordinator and a server-based protocol's aggregator, where the plan has them."""
    out = [collector_by_hand(plan_path, run_dir)]
    if plan.prephase:
        out.append(["dfl-node", "--coordinator", "--plan", str(plan_path), "--out", str(run_dir)])
    if plan.aggregator is not None:
        out.append(["dfl-node", "--plan", str(plan_path), "--out", str(run_dir), "--node-id",
                    str(plan.aggregator)])
    return out
