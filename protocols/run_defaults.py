"""Run defaults that protocols of several families declare alike
(`ProtocolDeclaration.run_defaults`).

Here, not in one family, because no family imports a sibling (the import contracts in
pyproject.toml): DMFL-SQ's paper compares it with DSGT and q-FFL (the gossip family), which run
with its settings, and SGP and Epidemic Learning (the dynamic family) run as D-PSGD does.
"""

from __future__ import annotations

from typing import Any

DMFLSQ_PAPER: dict[str, Any] = {
    "dataset": "fmnist", "partition": "dirichlet:0.5", "eval_split": "local", "eval_every": 5,
    "rounds": 100}
"""The DMFL-SQ paper's algorithm settings (Sec. VI) on data every install has: Fashion-MNIST in
label-skewed Dirichlet(0.5) shards, each client evaluated on its own test split (its training
class proportions: docs/protocols/dmfl-sq.md#a9), the small default CNN, 100 rounds. The
paper's CIFAR-10 setting: --config protocols/configs/dmfl-sq-cifar10.yaml (bench/sweeps/dmflsq.yaml
for the whole comparison)."""

GOSSIP_FMNIST: dict[str, Any] = {"dataset": "fmnist", "partition": "dirichlet:0.5", "rounds": 30}
"""D-PSGD's, SGP's and Epidemic Learning's: real Fashion-MNIST in label-skewed Dirichlet(0.5)
shards, the small CNN, the global evaluation subset, 30 rounds."""
