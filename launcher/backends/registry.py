"""The local backends by the name `--transport` gives them, and the default.

Each spec of launcher/config/backend_catalog.py that `dfl-launch` runs itself has its
implementation here; importing this module checks that none is missing.
"""

from __future__ import annotations

from launcher.backends.base import LocalBackend
from launcher.backends.processes import ProcessesBackend
from launcher.backends.threads import ThreadsBackend
from launcher.config.backend_catalog import DEFAULT_LOCAL, LOCAL, local_spec

LOCAL_BACKENDS: dict[str, LocalBackend] = {b.name: b for b in (ProcessesBackend(),
                                                                ThreadsBackend())}
if LOCAL_BACKENDS.keys() != LOCAL.keys():
    raise RuntimeError(f"local backends {sorted(LOCAL)} need one implementation each; "
                      f"launcher/backends has {sorted(LOCAL_BACKENDS)}")


def local_backend(name: object) -> LocalBackend:
    """The backend a plan's `transport` names; a LaunchError listing the choices else."""
    return LOCAL_BACKENDS[local_spec(name).name]


def default_backend() -> LocalBackend:
    return LOCAL_BACKENDS[DEFAULT_LOCAL]
