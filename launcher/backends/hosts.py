"""Hosts started by hand: `dfl-launch plan -o plan.json`, then one `dfl-node` per host.

The operator copies the plan to every host and starts `dfl-node --plan plan.json --node-id I`
there (launcher/node_cli.py; or each host resolves the same plan itself with `dfl-node
--topology ...`, launcher/config/host_plan.py), plus `dfl-node --coordinator` when the protocol
has a pre-phase; `dfl-launch collect --plan plan.json` gathers the results. Addresses come from
the topology's host:port where it gives them, and from free ports of this host otherwise (a
mesh on one machine started by hand).
"""

from __future__ import annotations

from pathlib import Path

from dfl_node.plan import RunPlan
from launcher.backends.base import HandOffBackend
from launcher.config.backend_catalog import HOSTS
from launcher.config.inputs import resolve
from launcher.config.ports import PortClaims
from launcher.config.run_spec import RunSpec


class HostsBackend(HandOffBackend):
    """The plan file is all an operator needs (and, for `--secure`, each host its keys)."""

    spec = HOSTS

    def resolve(self, req: RunSpec) -> RunPlan:
        claims = PortClaims()
        try:
            config, plan = resolve(req, claims)
        finally:
            claims.release()
        from launcher.config.keys import secure_plan  # ZeroMQ's CURVE: for a plan that holds

        return secure_plan(plan, config, None)

    def hand_off(self, plan: RunPlan, out: Path) -> Path:
        out.parent.mkdir(parents=True, exist_ok=True)
        plan.dump(out)
        return out
