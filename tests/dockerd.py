"""A private docker engine for tests, and the node image built in it from local files only.

`engine()` starts a `dockerd` of its own: data root, exec root, socket and pid file under one
fresh directory, no iptables rules, no default bridge, no ip forwarding, so it shares nothing
with another engine on the machine and changes nothing of the machine's network. On the way out,
also on failure, it removes every container, network and image it holds, stops the daemon,
unmounts what the daemon left mounted and deletes its directory; `leftovers()` says what
survived, for the test to assert there is nothing.

`base_image()` makes the node image's base without any registry: a Debian bookworm minbase
with python3 and its venv module (debootstrap from the apt mirror; the root file system is
cached as a tarball outside the repository) imported with `docker import`. `node_image()`
builds docker/Dockerfile on it from a wheelhouse made by this machine's pip, with a local CPU
torch wheel, so the build itself needs no network.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.proc_util import poll

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ("dockerd", "docker", "docker-compose", "debootstrap", "tar", "ip")
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30
DOCKER_TIMEOUT_S = 2400  # a bound, not an estimate: a build on a busy 2-core machine took 15 min
DEBIAN_MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = "python3,python3-venv"
CACHE = Path(os.environ.get("DFL_MESH_TEST_CACHE", "/var/cache/dfl-mesh-test"))
# Where this machine keeps wheels (pip's find-links, the project's local wheel dirs).
WHEEL_DIRS = (*os.environ.get("PIP_FIND_LINKS", "").split(), "/opt/wheels", "/opt/pypi-more/files")
# The base image's interpreter is Debian bookworm's python3: 3.11.
TORCH_WHEEL = re.compile(r"torch-(\d[^-]*\+cpu)-cp311-cp311-manylinux[^-]*_x86_64\.whl")
CONTAINERD_RUN = Path("/run/containerd")
SOURCES = ("pyproject.toml", "README.md", "dfl_config", "dfl_node", "launcher", "protocols",
           "topologies")


class EngineError(RuntimeError):
    """A docker command failed; the message is the command and its stderr."""


def unavailable() -> str | None:
    """Why no engine can run here (a skip reason), or None."""
    if os.geteuid() != 0:
        return "dockerd needs root"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    return f"missing {', '.join(missing)} (apt-get install docker.io docker-compose " \
           "debootstrap)" if missing else None


@dataclass
class Engine:
    """A running private dockerd."""

    root: Path
    proc: subprocess.Popen
    made_run_dir: bool = False  # whether /run/containerd was ours to remove
    networks: list[str] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": f"unix://{self.root}/docker.sock"}

    def run(self, *argv: str, stdin: bytes | None = None, cwd: Path | None = None,
            timeout: float = DOCKER_TIMEOUT_S) -> str:
        """A docker (or docker-compose) command against this engine; its stdout."""
        proc = subprocess.run(argv, input=stdin, capture_output=True, env=self.env, cwd=cwd,
                              timeout=timeout)
        if proc.returncode != 0:
            raise EngineError(f"{' '.join(argv)}: exit {proc.returncode}: "
                              f"{proc.stderr.decode(errors='replace')[-3000:]}")
        return proc.stdout.decode(errors="replace")

    def ids(self, *argv: str) -> list[str]:
        return self.run("docker", *argv).split()

    def remove_containers(self) -> None:
        """Every container removed, waiting out removals already in progress (a build whose
        client was killed leaves one behind)."""
        errors: list[EngineError] = []

        def removed() -> bool:
            while containers := self.ids("ps", "-aq"):
                try:
                    self.run("docker", "rm", "-f", *containers)
                except EngineError as exc:
                    errors.append(exc)
                    return False
            return True

        if not poll(removed, STOP_TIMEOUT_S):
            raise errors[-1]

    def clear(self) -> None:
        """Every container, network and image of this engine removed, or an EngineError
        naming what remains."""
        self.remove_containers()
        self.networks = self.ids("network", "ls", "-q", "--filter", "type=custom")
        self.run("docker", "network", "prune", "-f")
        self.run("docker", "image", "prune", "-a", "-f")
        remaining = [*self.ids("ps", "-aq"), *self.ids("images", "-aq"),
                     *self.ids("network", "ls", "-q", "--filter", "type=custom")]
        if remaining:
            raise EngineError(f"engine still holds {remaining}")


def start(root: Path) -> Engine:
    """dockerd on `root`, answering on its socket."""
    made_run_dir = not CONTAINERD_RUN.exists()
    log = (root / "dockerd.log").open("wb")
    proc = subprocess.Popen(
        ["dockerd", "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
         "--pidfile", str(root / "dockerd.pid"), "-H", f"unix://{root}/docker.sock",
         "--iptables=false", "--ip6tables=false", "--ip-forward=false", "--bridge=none",
         "--userland-proxy=false"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    engine = Engine(root, proc, made_run_dir)

    def answering() -> bool:
        if proc.poll() is not None:
            raise EngineError(f"dockerd exited {proc.returncode}: {tail(root / 'dockerd.log')}")
        with contextlib.suppress(EngineError, subprocess.TimeoutExpired):
            engine.run("docker", "version", timeout=10)
            return True
        return False

    if not poll(answering, START_TIMEOUT_S):
        stop(engine)
        raise EngineError(f"dockerd not answering after {START_TIMEOUT_S} s: "
                          f"{tail(root / 'dockerd.log')}")
    return engine


def tail(path: Path, chars: int = 2000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def stop(engine: Engine) -> None:
    """SIGTERM, then SIGKILL after STOP_TIMEOUT_S; then what the daemon may have left."""
    if engine.proc.poll() is None:
        engine.proc.send_signal(signal.SIGTERM)
        try:
            engine.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(engine.proc.pid, signal.SIGKILL)
            engine.proc.wait()
    for mount in sorted(mounts_under(engine.root), reverse=True):
        subprocess.run(["umount", "-l", mount], check=False)
    for link in bridges(engine.networks):
        subprocess.run(["ip", "link", "del", link], check=False)
    shutil.rmtree(engine.root, ignore_errors=True)
    if engine.made_run_dir:  # containerd's shim sockets live there whatever its root
        for folder in (CONTAINERD_RUN / "s", CONTAINERD_RUN):
            with contextlib.suppress(OSError):  # not empty: another engine's, still in use
                folder.rmdir()


def mounts_under(root: Path) -> list[str]:
    """Mount points at or below `root` (from this process's mount table)."""
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if p == str(root) or p.startswith(f"{root}/")]


def bridges(networks: list[str]) -> list[str]:
    """The host interfaces of these networks still present (docker names them br-<id:12>)."""
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                           check=False).stdout
    return [f"br-{n[:12]}" for n in networks if f"br-{n[:12]}" in links]


def leftovers(engine: Engine) -> list[str]:
    """What of the engine is still there: the daemon, mounts, bridges, its directory."""
    found = [*mounts_under(engine.root), *bridges(engine.networks)]
    if engine.proc.poll() is None:
        found.append(f"dockerd pid {engine.proc.pid}")
    if engine.root.exists():
        found.append(str(engine.root))
    if engine.made_run_dir and CONTAINERD_RUN.exists():
        found.append(str(CONTAINERD_RUN))
    return found


@contextlib.contextmanager
def engine() -> Iterator[Engine]:
    """A private engine for the block; cleared and stopped at the end, also on failure. The
    directory is short and under /tmp: unix socket paths are limited to 108 bytes."""
    root = Path(tempfile.mkdtemp(prefix="dfl-dockerd-", dir="/tmp"))
    made = start(root)
    try:
        yield made
    finally:
        try:
            made.clear()
        finally:
            stop(made)


def base_rootfs() -> Path:
    """The cached bookworm minbase + python3 root file system as a tarball, made if absent."""
    tarball = CACHE / f"bookworm-minbase-{BASE_PACKAGES.replace(',', '-')}.tar"
    if tarball.exists():
        return tarball
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        rootfs = Path(tmp) / "rootfs"
        subprocess.run(["debootstrap", "--variant=minbase", f"--include={BASE_PACKAGES}",
                        "bookworm", str(rootfs), DEBIAN_MIRROR], check=True,
                       capture_output=True, timeout=DOCKER_TIMEOUT_S)
        partial = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(partial), "."], check=True)
        partial.replace(tarball)
    return tarball


def base_image(engine: Engine, tag: str) -> str:
    """`tag`, imported from the cached root file system."""
    engine.run("docker", "import", str(base_rootfs()), tag)
    return tag


def torch_wheel() -> Path | None:
    """A CPU torch wheel for the base image's Python, from this machine's wheel directories
    (DFL_MESH_TORCH_WHEEL names one directly)."""
    if os.environ.get("DFL_MESH_TORCH_WHEEL"):
        return Path(os.environ["DFL_MESH_TORCH_WHEEL"])
    for folder in WHEEL_DIRS:
        found = sorted(p for p in Path(folder).glob("torch-*.whl") if TORCH_WHEEL.match(p.name))
        if found:
            return found[-1]
    return None


def build_context(into: Path, wheel: Path) -> tuple[Path, str]:
    """The sources and a wheelhouse (.whl/) that installs them with `wheel` and no network;
    the context and the torch wheel's path in it."""
    into.mkdir(parents=True)
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, into / name)
    version = TORCH_WHEEL.match(wheel.name).group(1)  # type: ignore[union-attr]
    pins = into / "pins.txt"
    pins.write_text(f"torch=={version}\n")
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "-w", str(into / ".whl"),
                    "--find-links", str(wheel.parent), "-c", str(pins), str(into), *requires],
                   check=True, capture_output=True, timeout=DOCKER_TIMEOUT_S)
    return into, f".whl/{wheel.name}"


def node_image(engine: Engine, base: str, tag: str, wheel: Path, workdir: Path) -> str:
    """docker/Dockerfile built on `base` with the CPU torch wheel, offline."""
    context, torch_path = build_context(workdir, wheel)
    engine.run("docker", "build", "--network", "none", "-f", str(ROOT / "docker" / "Dockerfile"),
               "--build-arg", f"BASE_IMAGE={base}", "--build-arg", "WHEELS=.whl",
               "--build-arg", f"TORCH_WHEEL={torch_path}", "-t", tag, str(context))
    return tag
