"""The per-host server a Slurm job forks its nodes from (launcher/slurm/host_server.py), run
here as the batch script runs it, without Slurm: one server, one client per node, the collector
of the discover plan. The nodes it forks run the mesh to the same bytes as the inproc run; a
signal to a client reaches its node, a killed client takes its node with it, and a stopped
server leaves no node and no socket behind. (tests/test_slurm_submit.py runs it under a real
Slurm.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher.slurm.host_server import socket_path
from launcher.slurm.job import node_command, server_key
from tests.harness import ROOT, final_files, in_process, launch_ok
from tests.proc_util import alive, children, wait_for, wait_gone

RUN_S = 300  # a bound on a 3-node synthetic run on a loaded 2-core machine
OPTIONS = ("--dataset", "synthetic", "--set", "wire.rendezvous_s=120")


def ring3(folder: Path) -> str:
    path = folder / "ring3.yaml"
    path.write_text(json.dumps({"name": "ring3", "nodes": [{"id": i} for i in range(3)],
                                "edges": [[0, 1], [1, 2], [2, 0]]}))
    return str(path)


class Job:
    """What the batch script starts on one host, and the collector `--submit` runs."""

    def __init__(self, tmp_path: Path, rounds: int) -> None:
        self.run = tmp_path / "run"
        self.name = f"test{os.getpid()}"
        done = in_process("dfl-launch", "slurm", "--topology", ring3(tmp_path), "--protocol",
                          "d-psgd", *OPTIONS, "--rounds", str(rounds), "--collector-host",
                          "127.0.0.1", "-o", str(self.run))
        assert done.code == 0, done.err
        plan = str(self.run / "plan.json")
        self.procs: list[subprocess.Popen[bytes]] = []
        self.collector = self.start("launcher.cli", "collect", "--plan", plan, "--out",
                                    str(self.run))
        # The socket key with the job id the script's shell would put in.
        self.key = server_key(self.run).replace("$SLURM_JOB_ID", self.name)
        self.server = self.start("launcher.slurm.host_server", "serve", plan, str(self.run),
                                 self.key)
        client = [word.replace("$SLURM_JOB_ID", self.name)  # as the script's shell does
                  for word in node_command(sys.executable, self.run / "plan.json", self.run,
                                           forked=True)]
        self.clients = [self.spawn("client", [*client, str(i)]) for i in range(3)]

    def start(self, module: str, *args: str) -> subprocess.Popen[bytes]:
        return self.spawn(module, [sys.executable, "-m", module, *args])

    def spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = (self.run / f"{name}-{len(self.procs)}.log").open("wb")
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.procs.append(proc)
        return proc

    def nodes(self) -> list[int]:
        return children(self.server.pid)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


@pytest.fixture
def job_of(tmp_path: Path) -> Iterator[list[Job]]:
    made: list[Job] = []
    yield made
    for job in made:
        left = job.nodes()
        job.close()
        for pid in left:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_nodes_forked_by_the_server_run_the_mesh_as_the_inproc_run(
        tmp_path: Path, job_of: list[Job]) -> None:
    job = Job(tmp_path, rounds=2)
    job_of.append(job)
    codes = [client.wait(RUN_S) for client in job.clients]
    assert codes == [0, 0, 0], (job.run / "launcher.slurm.host_server-1.log").read_text()
    assert job.collector.wait(RUN_S) == 0
    launch_ok(tmp_path / "inproc", ring3(tmp_path), "d-psgd", "--transport", "inproc",
              *OPTIONS, "--rounds", "2")
    assert len(final_files(job.run)) == 3
    assert final_files(job.run) == final_files(tmp_path / "inproc")
    job.server.send_signal(signal.SIGTERM)
    assert job.server.wait(RUN_S) == 0
    assert not Path(socket_path(job.key)).exists()


@pytest.mark.slow
def test_signals_reach_the_node_and_a_killed_client_takes_its_node_along(
        tmp_path: Path, job_of: list[Job]) -> None:
    job = Job(tmp_path, rounds=100000)
    job_of.append(job)
    metrics = job.run / "metrics.jsonl"
    wait_for(lambda: len(job.nodes()) == 3 and metrics.exists() and metrics.read_text(),
             RUN_S, "three forked nodes in their rounds")
    before = set(job.nodes())

    job.clients[0].send_signal(signal.SIGTERM)  # what Slurm sends a cancelled step first
    assert job.clients[0].wait(RUN_S) == 128 + signal.SIGTERM
    wait_for(lambda: len(set(job.nodes()) & before) == 2, RUN_S, "one node gone with SIGTERM")

    job.clients[1].kill()  # SIGKILL: the client cannot relay it; the server sees it hang up
    assert job.clients[1].wait(RUN_S) == -signal.SIGKILL
    wait_for(lambda: len(set(job.nodes()) & before) == 1, RUN_S, "the orphaned node killed")

    job.server.send_signal(signal.SIGTERM)  # the script's end, or the job's
    assert job.server.wait(RUN_S) == 0
    assert wait_gone(sorted(before), RUN_S) == []
    assert job.clients[2].wait(RUN_S) != 0
    assert not Path(socket_path(job.key)).exists()
