"""What the honest nodes of a run with adversaries achieved, from the run's files
(docs/run-directory.md#honest-nodes; launcher/run/summary.py puts it in summary.json).

An adversary's accuracy says nothing of a defence, and a sign-flipper drags the all-client
average down whether or not the honest nodes were protected: a robust-learning paper reports
the honest nodes alone. The launcher knows who attacks from the plan, so no node sends anything
new for it: accuracies come from the nodes' final records, the backdoor's success rate from the
last evaluation each honest node wrote to metrics.jsonl, and the consensus distance from the
honest nodes' final models in the run directory (parameters never cross the mesh for it).

A run without adversaries gets none of these keys: every client is honest, and the summary's
own keys say the same.
"""

from __future__ import annotations

import json
from pathlib import Path

from dfl_node.plan import RunPlan

FINAL = "final/node-{}.safetensors"


def honest_clients(plan: RunPlan) -> list[int]:
    """The clients that are not adversaries, in id order."""
    return [i for i in plan.clients if i not in plan.adversaries]


def final_consensus_distance(run_dir: Path, members: list[int]) -> float | None:
    """The consensus distance of `members`' final models (every floating-point tensor, as
    params records carry them); None unless each has its file here (a mesh collected from
    other hosts keeps them there)."""
    paths = [run_dir / FINAL.format(i) for i in members]
    if not members or not all(p.is_file() for p in paths):
        return None
    import numpy as np  # once a run has ended, as fairness does
    from safetensors.numpy import load_file

    from launcher.results.consensus import consensus_gap

    params = {}
    for i, path in zip(members, paths, strict=True):
        params[i] = {name: t for name, t in load_file(str(path)).items()
                     if np.issubdtype(t.dtype, np.floating)}
    return consensus_gap(params, members, list(params[members[0]]))


def backdoor_keys(metrics: Path, honest: list[int]) -> dict[str, float]:
    """`backdoor_asr`, the mean over the honest nodes of their last evaluation's attack success
    rate, and `worst_backdoor_asr`, the highest; {} when no honest node measured one (no
    backdoor in the run)."""
    last: dict[int, tuple[int, float]] = {}
    wanted = set(honest)
    lines = metrics.read_text().splitlines() if metrics.is_file() else []
    for line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # a torn last line (a killed writer)
            continue
        node, round_, asr = row.get("node"), row.get("round"), row.get("backdoor_asr")
        if (node in wanted and isinstance(round_, int) and isinstance(asr, int | float)
                and round_ >= last.get(node, (-1, 0.0))[0]):
            last[node] = (round_, float(asr))
    rates = [asr for _, asr in last.values()]
    if not rates:
        return {}
    return {"backdoor_asr": sum(rates) / len(rates), "worst_backdoor_asr": max(rates)}
