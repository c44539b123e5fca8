"""`dfl-launch slurm -o DIR` without a cluster: the discover plan, the batch script that asks
Slurm for one task per node, and the options refused before anything is written or submitted.
(tests/test_slurm_submit.py runs the script on a real Slurm.)"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dfl_node.plan import RunPlan
from launcher.config.run_spec import RunSpec
from launcher.errors import LaunchError
from launcher.node_cli import node_from_env
from launcher.run.lock import RunLock
from launcher.slurm.job import (
    HOST_CLIENT,
    JobShape,
    Resources,
    check_fits,
    server_key,
    task_ids,
)
from launcher.slurm.queue import early_shape
from launcher.slurm.task_client import socket_path
from tests.harness import ROOT, in_process

RUN = ("--dataset", "synthetic", "--rounds", "2")


def topology(tmp_path: Path, ids: tuple[int, ...] = (0, 1, 2, 3, 4, 5)) -> str:
    """A ring over `ids`, no host or port anywhere."""
    edges = [[a, b] for a, b in zip(ids, ids[1:] + ids[:1], strict=True)]
    path = tmp_path / "ring.yaml"
    path.write_text(json.dumps({"name": "ring", "nodes": [{"id": i} for i in ids],
                                "edges": edges}))
    return str(path)


def slurm(tmp_path: Path, *args: str, ids: tuple[int, ...] = (0, 1, 2, 3, 4, 5),
          out: str = "job") -> tuple[int, str, str]:
    done = in_process("dfl-launch", "slurm", "--topology", topology(tmp_path, ids), "--protocol",
                      "d-psgd", *RUN, "--collector-host", "10.9.8.7", *args, "-o",
                      str(tmp_path / out))
    return done.code, done.out, done.err


def directives(script: str) -> dict[str, str]:
    pairs = [line.removeprefix("#SBATCH ").split("=", 1) for line in script.splitlines()
             if line.startswith("#SBATCH ")]
    return dict((k, v) for k, v in pairs)


def sruns(script: str) -> list[list[str]]:
    return [shlex.split(line.rstrip("\\").removesuffix("&")) for line in script.splitlines()
            if line.strip().startswith("srun ")]


HOSTS_STEP = ["srun", "--overlap", "--nodes=$SLURM_JOB_NUM_NODES", "--ntasks-per-node=1",
              "--ntasks=$SLURM_JOB_NUM_NODES", "--job-name=hosts", sys.executable, "-m",
              "launcher.slurm.host_server", "serve"]


def test_the_script_asks_for_one_task_per_node_and_runs_them_as_one_step(
        tmp_path: Path) -> None:
    code, out, err = slurm(tmp_path)
    assert code == 0, err
    job = tmp_path / "job"
    script = (job / "job.sh").read_text()
    assert script.startswith("#!/bin/bash\n")
    assert directives(script) == {
        "--job-name": "dfl-d-psgd-ring", "--ntasks": "6", "--cpus-per-task": "1",
        "--time": "01:00:00", "--output": f"{job}/slurm-%j.out"}
    assert sruns(script) == [
        [*HOSTS_STEP, f"{job}/plan.json", str(job), server_key(job)],
        ["srun", "--ntasks=6", "--cpus-per-task=1", "--job-name=nodes"]]
    # the task at rank r runs node ids[r]: the plan's task ids in order
    assert "ids=(0 1 2 3 4 5); id=${ids[$SLURM_PROCID]}" in script
    # the client needs only the standard library: no site-packages to scan, fifty times over
    assert f'{sys.executable} -S -I {HOST_CLIENT} "{server_key(job)}"\n' in script
    assert (job / "steps" / "plan.ready").exists()  # written by hand: the job may go at once
    assert out.startswith(f"sbatch {job}/job.sh")


# What a client would import through the standard library's wrappers (socket, signal, json):
# each costs every one of a job's tasks milliseconds of CPU on the way to round 1.
WRAPPERS = {"socket", "signal", "json", "enum", "re", "selectors", "typing", "array"}


def test_a_nodes_client_imports_only_what_the_interpreter_has_built_in() -> None:
    done = subprocess.run([sys.executable, "-S", "-I", "-X", "importtime", str(HOST_CLIENT)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2  # no job given: its usage line
    lines = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    imported = {line.rsplit("|", 1)[1].strip() for line in lines}
    assert "_socket" in imported  # the measurement sees the client's imports
    assert not imported & WRAPPERS, imported & WRAPPERS
    assert not [name for name in imported if name.split(".")[0] in {"launcher", "torch"}]


def test_with_step_per_node_each_node_is_its_own_step(tmp_path: Path) -> None:
    code, _, err = slurm(tmp_path, "--step-per-node")
    assert code == 0, err
    job = tmp_path / "job"
    script = (job / "job.sh").read_text()
    assert directives(script)["--ntasks"] == "6"
    assert sruns(script) == [
        [*HOSTS_STEP, f"{job}/plan.json", str(job), server_key(job)],
        ["srun", "--ntasks=1", "--nodes=1", "--exact", "--cpus-per-task=1",
         "--job-name=node-$1"]]
    assert f'{sys.executable} -S -I {HOST_CLIENT} "{server_key(job)}" "$1"' in script
    assert 'for id in 0 1 2 3 4 5; do node "$id" & nodes+=($!); done' in script


def run_script(job: Path, srun: str, bin_dir: Path,
               **env: str) -> subprocess.CompletedProcess[str]:
    """job.sh run here with `srun` as a stand-in for Slurm's, `env` added to its environment."""
    bin_dir.mkdir()
    fake = bin_dir / "srun"
    fake.write_text(srun)
    fake.chmod(0o755)
    return subprocess.run(["bash", str(job / "job.sh")], env={
        **os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "7",
        "SLURM_JOB_NUM_NODES": "2", **env}, capture_output=True, text=True, timeout=60)


def exits(job: Path) -> dict[int, str]:
    return {int(f.stem.split("-")[1]): f.read_text().strip()
            for f in (job / "steps").glob("*.exit")}


# Runs each task of the nodes' step as srun would (its rank in SLURM_PROCID), with a stand-in
# for the client: node 4 exits 137; the task of rank 2 is killed before it records anything.
ONE_STEP_SRUN = """#!/bin/bash
while [[ $1 == --* ]]; do [[ $1 == --job-name=hosts ]] && exit 0; shift; done
for rank in 0 1 2 3 4 5; do
    [ "$rank" = 2 ] && continue
    SLURM_PROCID=$rank bash -c "$3" node sh -c 'exit $(( $1 == 4 ? 137 : 0 ))' stand-in &
done
wait
exit 137
"""


def test_each_task_records_its_nodes_exit_status_where_submit_reads_it(tmp_path: Path) -> None:
    """The script itself, run here with a stand-in srun (and no host server): every node's
    status lands in steps/node-<id>.exit, the killed task's as the step's, and the job's own
    status is a failure."""
    assert slurm(tmp_path)[0] == 0
    job = tmp_path / "job"
    done = run_script(job, ONE_STEP_SRUN, tmp_path / "bin")
    assert done.returncode == 1, done.stderr  # the job fails: nodes did
    assert exits(job) == {0: "0", 1: "0", 2: "137", 3: "0", 4: "137", 5: "0"}


def test_each_step_records_its_exit_status_where_submit_reads_it(tmp_path: Path) -> None:
    """As above, a step per node: the stand-in srun exits as a killed step does for node 4."""
    assert slurm(tmp_path, "--step-per-node")[0] == 0
    job = tmp_path / "job"
    done = run_script(job, '#!/bin/sh\nfor last; do :; done\nexit $((last == 4 ? 137 : 0))\n',
                      tmp_path / "bin")
    assert done.returncode == 1, done.stderr  # the job fails: a node's step did
    assert exits(job) == {0: "0", 1: "0", 2: "0", 3: "0", 4: "137", 5: "0"}


# Records the socket key the host step's server is given and the one the nodes' clients are
# (each step's last word, as bash expands it).
RECORDING_SRUN = """#!/bin/bash
for last; do :; done
case " $* " in *" --job-name=hosts "*) role=server ;; *) role=client ;; esac
echo "$role $last" >> "$KEYS"
"""


def test_two_runs_of_one_job_id_on_one_host_name_two_server_sockets(tmp_path: Path) -> None:
    """Two clusters that share a host's /tmp (two Slurm labs on one machine, diskless nodes)
    number their jobs alike: each run's clients must reach their own run's server, never a
    socket of the other's. Both scripts run here as job 7."""
    keys = {}
    for out in ("a", "b"):
        assert slurm(tmp_path, out=out)[0] == 0
        record = tmp_path / f"{out}.keys"
        done = run_script(tmp_path / out, RECORDING_SRUN, tmp_path / f"bin-{out}",
                          KEYS=str(record))
        assert done.returncode == 0, done.stderr
        said = dict(line.split() for line in record.read_text().splitlines())
        assert said["client"] == said["server"]  # a run's clients find its server
        assert said["server"].startswith("7-")  # the job id, expanded
        keys[out] = said["server"]
    assert socket_path(keys["a"]) != socket_path(keys["b"])


def test_gpus_per_task_binds_each_node_to_the_first_gpu_its_task_sees(tmp_path: Path) -> None:
    code, _, err = slurm(tmp_path, "--gpus-per-task", "2")
    assert code == 0, err
    job = tmp_path / "job"
    script = (job / "job.sh").read_text()
    assert directives(script)["--gpus-per-task"] == "2"
    assert "srun --ntasks=6 --cpus-per-task=1 --gpus-per-task=2 " in script
    # Slurm binds GPUs to a step's own processes: each node is its step's, not forked
    assert "host_server" not in script
    assert '-m launcher.node_cli --plan' in script
    waits = script.index(f"[ -e {job}/steps/plan.ready ] && break")
    assert waits < script.index("srun ")  # no step before the plan is there
    assert {n.device for n in RunPlan.load(job / "plan.json").nodes} == {"cuda:0"}


def test_an_aggregator_runs_on_the_submit_host_not_as_a_task(tmp_path: Path) -> None:
    done = in_process("dfl-launch", "slurm", "--topology", topology(tmp_path), "--protocol",
                      "qffl", *RUN, "--collector-host", "10.9.8.7", "-o", str(tmp_path / "q"))
    assert done.code == 0, done.err
    plan = RunPlan.load(tmp_path / "q" / "plan.json")
    script = (tmp_path / "q" / "job.sh").read_text()
    assert plan.aggregator == 6 and len(plan.ids) == 7
    assert directives(script)["--ntasks"] == "6"
    assert 'for id in 0 1 2 3 4 5; do' in script
    assert "--node-id 6" in script  # the hand-run line for the submit host
    assert plan.node(6).address.startswith("tcp://10.9.8.7:")


def test_the_plan_is_a_discover_plan_with_its_services_on_the_collector_host(
        tmp_path: Path) -> None:
    assert slurm(tmp_path)[0] == 0
    plan = RunPlan.load(tmp_path / "job" / "plan.json")
    assert {(n.address, n.host) for n in plan.nodes} == {("", "")}
    assert plan.collector.startswith("tcp://10.9.8.7:")
    assert plan.discovery is not None
    assert plan.discovery.address.startswith("tcp://10.9.8.7:")
    assert plan.discovery.address != plan.collector


def test_every_resource_option_becomes_its_directive(tmp_path: Path) -> None:
    code, _, err = slurm(tmp_path, "--cpus-per-task", "2", "--mem-per-cpu", "2G", "--time",
                         "1-02:00", "--slurm-partition", "gpu-a100", "--account", "proj.42")
    assert code == 0, err
    got = directives((tmp_path / "job" / "job.sh").read_text())
    assert {k: got[k] for k in ("--cpus-per-task", "--mem-per-cpu", "--time", "--partition",
                                "--account")} == {
        "--cpus-per-task": "2", "--mem-per-cpu": "2G", "--time": "1-02:00",
        "--partition": "gpu-a100", "--account": "proj.42"}


@pytest.mark.parametrize(("args", "needle"), [
    (("--time", "1h"), "--time: expected minutes, HH:MM:SS or D-HH:MM:SS, got '1h'"),
    (("--mem-per-cpu", "lots"), "--mem-per-cpu: expected a size such as 4096 or 4G"),
    (("--cpus-per-task", "0"), "--cpus-per-task: must be at least 1, got 0"),
    (("--gpus-per-task", "-1"), "--gpus-per-task: must be 0 or more, got -1"),
    (("--slurm-partition", "a;rm -rf"), "--slurm-partition: not a Slurm name"),
    (("--account", "a b"), "--account: not a Slurm name"),
    (("--secure",), "endpoints.nodes=discover: --secure is not supported yet"),
    (("--seeds", "0-1"), "--seeds: one node runs one seed"),
    (("--transport", "inproc"), "--transport: dfl-node runs over zmq"),
])
def test_bad_options_are_one_line_exit_2_and_nothing_written(
        tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    code, _, err = slurm(tmp_path, *args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and needle in lines[0], err
    assert not (tmp_path / "job" / "job.sh").exists()


def test_a_directory_with_results_is_not_overwritten(tmp_path: Path) -> None:
    assert slurm(tmp_path)[0] == 0
    assert slurm(tmp_path, "--time", "30")[0] == 0  # written, not run: rewritten
    assert directives((tmp_path / "job" / "job.sh").read_text())["--time"] == "30"
    (tmp_path / "job" / "summary.json").write_text("{}")
    code, _, err = slurm(tmp_path)
    assert code == 2 and "holds a run's results; pick another directory" in err


def test_a_run_larger_than_the_partition_is_refused(tmp_path: Path) -> None:
    assert slurm(tmp_path)[0] == 0
    tasks = len(task_ids(RunPlan.load(tmp_path / "job" / "plan.json")))
    check_fits(tasks, Resources(cpus_per_task=2), "lab", 12)
    with pytest.raises(LaunchError, match=r"the run needs 6 tasks x 2 CPU\(s\) = 12 CPUs at "
                                          r"once; partition lab has 11"):
        check_fits(tasks, Resources(cpus_per_task=2), "lab", 11)


@pytest.mark.parametrize("protocol", ["d-psgd", "qffl", "ssd-fl"])
def test_the_job_queued_before_the_plan_is_the_job_of_the_plan(tmp_path: Path,
                                                                protocol: str) -> None:
    """`--submit` queues the job from the topology file and the protocol's name alone
    (launcher/slurm/queue.py), without importing the protocol: the same name and tasks as the
    plan resolved afterwards gives (an aggregator is a node beyond the topology's)."""
    ring = topology(tmp_path, (3, 5, 8, 9))
    run = tmp_path / protocol
    done = in_process("dfl-launch", "slurm", "--topology", ring, "--protocol", protocol, *RUN,
                      "--collector-host", "10.9.8.7", "-o", str(run))
    assert done.code == 0, done.err
    plan = RunPlan.load(run / "plan.json")
    early = early_shape(RunSpec(topology=ring, protocol=protocol), run)
    full = JobShape.of(plan, run / "plan.json", run)
    assert (early.name, early.tasks) == (full.name, full.tasks) == (
        f"dfl-{protocol}-ring", (3, 5, 8, 9))
    assert early.services == full.services[:1]  # the collector; the rest once resolved
    # torch takes seconds to import, numpy and networkx a third of one: none delays the job
    code = subprocess.run([sys.executable, "-c", "import sys, launcher.cli, launcher.slurm.queue;"
                           f" launcher.slurm.queue.load_topology({str(ring)!r}); sys.exit(bool("
                           "{'torch', 'numpy', 'networkx'} & set(sys.modules)))"],
                          cwd=ROOT).returncode
    assert code == 0, "dfl-launch slurm --submit imports torch, numpy or networkx before sbatch"


@pytest.mark.parametrize("dataset", ["synthetic", "fmnist"])
def test_a_slurm_job_is_planned_and_followed_without_torch(tmp_path: Path, dataset: str) -> None:
    """`dfl-launch slurm` resolves and checks the plan, with every protocol's spec loaded (the
    config is validated against all of them), and the modules that collect the job's run are
    imported, all without torch: on the lab's 2 cores the job's hosts import it meanwhile, and
    a third import took a third of the mesh's start (docs/benchmarks.md)."""
    probe = ("import sys\n"
             "from launcher.cli import main\n"
             "import launcher.slurm.submit, launcher.run.finish, launcher.slurm.backend\n"
             "from protocols.registry import PROTOCOLS\n"
             "assert len(dict(PROTOCOLS)) >= 15\n"
             "sys.argv = ['dfl-launch', *sys.argv[1:]]\n"
             "try:\n"
             "    main()\n"
             "except SystemExit as exc:\n"
             "    assert not exc.code, exc.code\n"
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'torchvision'}))\n")
    run = tmp_path / "run"
    done = subprocess.run([sys.executable, "-c", probe, "slurm", "--topology",
                           topology(tmp_path), "--protocol", "d-psgd", "--dataset", dataset,
                           "--rounds", "2", "--collector-host", "10.9.8.7", "-o", str(run)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
    assert RunPlan.load(run / "plan.json").protocol == "d-psgd"


def test_a_protocol_that_no_package_registers_is_refused_before_anything_is_queued(
        tmp_path: Path) -> None:
    with pytest.raises(LaunchError, match=r"--protocol: unknown protocol 'd-pgsd' \(known: .*"
                                          r"d-psgd"):
        early_shape(RunSpec(topology=topology(tmp_path), protocol="d-pgsd"), tmp_path)


def test_a_task_runs_the_node_at_its_rank_in_the_plan(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert slurm(tmp_path, ids=(10, 3, 7))[0] == 0
    plan = tmp_path / "job" / "plan.json"
    for rank, node in enumerate((3, 7, 10)):
        monkeypatch.setenv("RANK_UNDER_TEST", str(rank))
        assert node_from_env(plan, "RANK_UNDER_TEST") == node
    for bad in ("3", "-1", "x"):
        monkeypatch.setenv("RANK_UNDER_TEST", bad)
        with pytest.raises(LaunchError, match=r"--node-id-from-env RANK_UNDER_TEST: expected "
                                              r"an index 0\.\.2 of the plan's nodes"):
            node_from_env(plan, "RANK_UNDER_TEST")


def test_dfl_node_without_the_variable_is_one_line_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert slurm(tmp_path)[0] == 0
    monkeypatch.delenv("SLURM_PROCID", raising=False)
    done = in_process("dfl-node", "--plan", str(tmp_path / "job" / "plan.json"),
                      "--node-id-from-env", "SLURM_PROCID")
    assert done.code == 2
    assert done.err.strip() == ("dfl-node: --node-id-from-env SLURM_PROCID: expected an index "
                                "0..5 of the plan's nodes, got None")


def test_a_transport_the_hosts_do_not_speak_is_refused_before_anything_is_queued(
        tmp_path: Path) -> None:
    """The tasks run zmq nodes: `--transport inproc` (as a quick reproduction's recipe says
    for a local run) would be refused by the plan, after sbatch; early_shape refuses it before."""
    with pytest.raises(LaunchError, match=r"^--transport: dfl-node runs over zmq$"):
        early_shape(RunSpec(topology=topology(tmp_path), protocol="d-psgd",
                            options={"transport": "inproc"}),
                    tmp_path)
    early_shape(RunSpec(topology=topology(tmp_path), protocol="d-psgd",
                        options={"transport": "zmq"}), tmp_path)


def test_the_plan_comes_with_the_config_a_run_directory_keeps(tmp_path: Path) -> None:
    """`dfl-report` and RunResult.config read RUN_DIR/config.yaml, which `--submit` writes from
    the config its plan was resolved from (launcher/slurm/submit.py): a local run's, addresses
    aside (tests/test_reproduce_slurm.py reads a report of submitted runs)."""
    from launcher.config.inputs import resolve_inputs
    from launcher.slurm.backend import SlurmBackend

    req = RunSpec(topology=topology(tmp_path), protocol="d-psgd",
                  options={"dataset": "synthetic", "rounds": 2})
    backend = SlurmBackend(Resources(), "10.9.8.7")
    try:
        config, plan = backend.resolve_run(req)
    finally:
        backend.close()
    assert plan.protocol == config["protocol"] == "d-psgd" and config["rounds"] == 2
    assert config["hyper"] == plan.hyper
    assert {k: v for k, v in config.items() if k != "endpoints"} == {
        k: v for k, v in resolve_inputs(req)[1].items() if k != "endpoints"}


def test_a_submission_into_a_run_directory_in_use_is_refused_before_the_queue(
        tmp_path: Path) -> None:
    """One launcher per run directory, as for a local run: a second `--submit` (or a
    `--resume`) into a directory whose run is still being collected would interleave its files
    with the first one's; it is refused, before it asks Slurm anything or writes a file."""
    run = tmp_path / "job"
    run.mkdir()
    with RunLock(run) as held:
        held.mark()
        code, out, err = slurm(tmp_path, "--submit")
    assert (code, out) == (2, "")
    assert err.strip().splitlines() == [
        f"dfl-launch: {run}: in use by another launcher (pid {os.getpid()}, holding "
        f"{run / 'run.lock'}); wait for it to end or stop it"]
    assert sorted(p.name for p in run.iterdir()) == ["run.lock"]
