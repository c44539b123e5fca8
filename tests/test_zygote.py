"""The processes backend's zygote (launcher/backends/zygote.py): nodes forked on request, their
exit codes as multiprocessing gives them, nothing of the launcher's left open in them."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from launcher.backends.zygote import Zygote


def node(path: str, how: str) -> None:
    """A node that records its pid and ends as `how` says (its stderr goes to `path`.err, as a
    launched node's goes to its log)."""
    Path(path).write_text(str(os.getpid()))
    sys.stderr = open(f"{path}.err", "w")  # noqa: SIM115  # flushed by the zygote's node exit
    if how == "exit3":
        sys.exit(3)
    if how == "raise":
        raise RuntimeError("a failing node")
    if how == "hang":
        signal.pause()


@pytest.fixture
def zygote() -> Iterator[Zygote]:
    z = Zygote(node)
    z.warm_up(False)
    yield z
    z.close()


def test_exit_codes_are_multiprocessing_s(tmp_path: Path, zygote: Zygote) -> None:
    hows = ["ok", "exit3", "raise", "hang"]
    nodes = list(zygote.start([(str(tmp_path / how), how) for how in hows]))
    for n in nodes[:3]:
        n.join(60)
    assert [n.pid for n in nodes[:3]] == [int((tmp_path / how).read_text()) for how in hows[:3]]
    hung = nodes[3]
    assert hung.exitcode is None
    hung.kill()
    hung.join(60)
    assert [n.exitcode for n in nodes] == [0, 3, 1, -signal.SIGKILL]
    assert "RuntimeError: a failing node" in (tmp_path / "raise.err").read_text()


def test_a_node_holds_no_descriptor_the_launcher_had_open(tmp_path: Path) -> None:
    """A pipe of the launcher's (a caller waiting for its end, say) must not stay open in
    nodes that outlive it."""
    read_end, write_end = os.pipe()
    z = Zygote(node)
    try:
        os.close(write_end)
        z.warm_up(False)
        (hung,) = z.start([(str(tmp_path / "pid"), "hang")])
        assert select.select([read_end], [], [], 60)[0]
        assert os.read(read_end, 1) == b""  # EOF: no other process holds the write end
        hung.terminate()
        hung.join(60)
        assert hung.exitcode == -signal.SIGTERM
    finally:
        os.close(read_end)
        z.close()


def test_closing_ends_the_zygote(zygote: Zygote) -> None:
    pid = zygote.pid
    zygote.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def test_a_launcher_gone_mid_start_ends_the_zygote_quietly(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A launcher stopped (SIGTERM) between asking for a node and hearing its pid: the zygote
    forks the node, finds the launcher's end closed when it reports the pid, and ends as it
    does when the launcher hangs up (exit 0), not with a traceback in the run's log."""
    z = Zygote(node)
    z.warm_up(False)
    z._send({"start": [str(tmp_path / "pid"), "ok"]})
    assert z._sock is not None
    z._sock.close()  # what the launcher's death does to its end
    z._sock = None
    _, status = os.waitpid(z.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert "Traceback" not in capfd.readouterr().err
    z.close()


def blas_threads(path: str) -> None:
    """A node that writes the thread count of every OpenBLAS its process has loaded."""
    with open("/proc/self/maps", encoding="utf-8") as maps:
        libraries = sorted({line.split()[-1] for line in maps if "openblas" in line.lower()
                            and line.split()[-1].startswith("/")})
    counts = []
    for library in map(ctypes.CDLL, libraries):
        getter = next((getattr(library, name) for name in
                       ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                        "openblas_get_num_threads") if hasattr(library, name)), None)
        if getter is not None:
            counts.append(getter())
    Path(path).write_text(",".join(map(str, counts)))


def test_a_node_runs_one_blas_thread(tmp_path: Path) -> None:
    """As under the forkserver this replaced (OMP_NUM_THREADS=1): numpy's BLAS pool is sized
    when the launcher imports numpy, from the machine's cores."""
    z = Zygote(blas_threads)
    try:
        z.warm_up(False)
        (n,) = z.start([(str(tmp_path / "blas"),)])
        n.join(60)
    finally:
        z.close()
    counts = (tmp_path / "blas").read_text()
    if not counts:
        pytest.skip("numpy here uses no OpenBLAS")
    assert set(counts.split(",")) == {"1"}
