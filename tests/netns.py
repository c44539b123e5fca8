"""Separate network stacks on one machine, for tests: Linux network namespaces on a bridge.

A `Lab` is `count` host namespaces, each with one veth link (`eth0`, an address in a private
/24 of the lab's own) whose other end hangs on a bridge in one more namespace. Both ends of
every link are made directly inside namespaces, so nothing is added to the machine's own
network stack and traffic reaches only the lab's namespaces. Names carry a random prefix, so
concurrent labs never collide; `lab()` deletes everything it made, also on failure, and
`leftovers()` lets a test check that it did.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

IP_TIMEOUT_S = 20


class LabError(RuntimeError):
    """A namespace or link could not be made; the message is the failing command."""


def ip(*args: str, netns: str | None = None) -> str:
    """Run `ip [-n NETNS] ARGS`; its stdout, or LabError with its stderr."""
    cmd = ["ip", *(["-n", netns] if netns else []), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if proc.returncode != 0:
        raise LabError(f"{' '.join(cmd)}: {proc.stderr.strip()}")
    return proc.stdout


def unavailable() -> str | None:
    """Why namespaces cannot be made here (a skip reason), or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the ip command (iproute2) is not installed"
    probe = f"dflprobe{secrets.token_hex(3)}"
    try:
        ip("netns", "add", probe)
    except (LabError, OSError) as exc:
        return f"cannot create a network namespace: {exc}"
    ip("netns", "del", probe)
    return None


def used_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network the machine's own stack routes, so a lab picks none of them."""
    out = []
    for line in ip("-4", "-o", "addr", "show").splitlines():
        words = line.split()
        out.append(ipaddress.IPv4Interface(words[words.index("inet") + 1]).network)
    return out


def free_subnet() -> ipaddress.IPv4Network:
    """A random /24 in 10.0.0.0/8 that overlaps nothing the machine routes."""
    used = used_networks()
    for _ in range(100):
        second, third = secrets.randbelow(200) + 50, secrets.randbelow(256)
        net = ipaddress.IPv4Network(f"10.{second}.{third}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise LabError("no free private /24 found")


@dataclass
class Lab:
    prefix: str
    subnet: ipaddress.IPv4Network
    hosts: list[str] = field(default_factory=list)  # namespace names, host k at .k+1
    made: list[str] = field(default_factory=list)  # every namespace made, the bridge's too

    def address(self, k: int) -> str:
        return str(self.subnet.network_address + k + 1)

    def exec_prefix(self, k: int) -> list[str]:
        """The argv prefix that runs a command inside host k's namespace."""
        return ["ip", "netns", "exec", self.hosts[k]]

    def enter_prefix(self, k: int) -> list[str]:
        """Like `exec_prefix`, but entering only the network namespace: `ip netns exec` also
        remounts /sys, which hides the machine's cgroup mounts from a program that reads them
        at start (slurmd, tests/slurm_lab.py)."""
        return ["nsenter", f"--net=/run/netns/{self.hosts[k]}"]


def add_namespace(lab: Lab, name: str) -> str:
    ip("netns", "add", name)
    lab.made.append(name)
    ip("link", "set", "lo", "up", netns=name)
    return name


def build(lab: Lab, count: int) -> None:
    bridge = add_namespace(lab, f"{lab.prefix}-br")
    ip("link", "add", "br0", "type", "bridge", netns=bridge)
    ip("link", "set", "br0", "up", netns=bridge)
    for k in range(count):
        host = add_namespace(lab, f"{lab.prefix}-h{k}")
        lab.hosts.append(host)
        ip("link", "add", "eth0", "netns", host, "type", "veth", "peer", "name", f"p{k}",
           "netns", bridge)
        ip("link", "set", f"p{k}", "master", "br0", "up", netns=bridge)
        ip("addr", "add", f"{lab.address(k)}/{lab.subnet.prefixlen}", "dev", "eth0", netns=host)
        ip("link", "set", "eth0", "up", netns=host)


def leftovers(prefix: str) -> list[str]:
    """Namespaces and links of the machine whose names carry `prefix` (none after cleanup)."""
    names = [line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()]
    links = [line.split(":")[1].strip() for line in ip("-o", "link", "show").splitlines()]
    return [n for n in (*names, *links) if prefix in n]


def teardown(names: Sequence[str]) -> list[str]:
    """Delete the namespaces (their links go with them); the errors, if any."""
    errors = []
    for name in reversed(names):
        try:
            ip("netns", "del", name)
        except (LabError, OSError) as exc:
            errors.append(str(exc))
    return errors


@contextmanager
def lab(count: int) -> Iterator[Lab]:
    """`count` host namespaces on one bridge; removed on exit, whatever happened."""
    made = Lab(prefix=f"dfl{secrets.token_hex(3)}", subnet=free_subnet())
    try:
        build(made, count)
        yield made
    finally:
        errors = teardown(made.made)
        if errors:
            raise LabError("; ".join(errors))
