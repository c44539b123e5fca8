"""Where a run's services listen: the collector, the pre-phase coordinator, a server's hub.

A local run needs no addresses: the launcher claims free loopback ports. A mesh spread over
hosts needs fixed ones, so config key `endpoints.<service>` takes `host:port` (a name or an IP);
a node binds the wildcard address of that port, because a host name is for connecting, not for
binding, and the host may have several interfaces.
"""

from __future__ import annotations

from typing import Any

from launcher.config.ports import PortClaims
from launcher.errors import LaunchError

LOCAL_HOST = "127.0.0.1"
LOOPBACK = (LOCAL_HOST, "localhost")
SERVICES = ("collector", "coordinator", "aggregator")
# A discovered node listens on every interface, on a port the OS picks (ZeroMQ's `*`).
DISCOVER_BIND = "tcp://0.0.0.0:*"


def bind_host(host: str) -> str:
    """The interface a listener on `host` binds: loopback stays loopback, else every interface."""
    return host if host in LOOPBACK else "0.0.0.0"


def parse_endpoint(service: str, text: Any) -> tuple[str, int]:
    """`host:port` as (host, port); a LaunchError naming `endpoints.<service>` otherwise."""
    host, sep, port = str(text).rpartition(":")
    if not (isinstance(text, str) and sep and host and port.isdigit()
            and 0 < int(port) < 65536):
        raise LaunchError(f"endpoints.{service}: expected host:port, got {text!r}")
    return host, int(port)


def fixed_endpoint(config: dict[str, Any], service: str) -> tuple[str, int] | None:
    """The configured (host, port) of `service`, or None for a local run's default."""
    text = config.get("endpoints", {}).get(service)
    return None if text is None else parse_endpoint(service, text)


def endpoint(config: dict[str, Any], service: str, claims: PortClaims) -> tuple[str, str]:
    """(bind, address) of `service`: the configured one, or a claimed loopback port."""
    fixed = fixed_endpoint(config, service)
    host, port = fixed if fixed is not None else (LOCAL_HOST, claims.claim(1)[0])
    return f"tcp://{bind_host(host)}:{port}", f"tcp://{host}:{port}"


def wildcard_bind(address: str) -> str:
    """The bind address for listening on `address` (a `tcp://host:port` of a plan)."""
    host, _, port = address.removeprefix("tcp://").rpartition(":")
    return f"tcp://{bind_host(host)}:{port}"
