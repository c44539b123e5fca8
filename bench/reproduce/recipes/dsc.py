"""DSC's experiments (Sec. V): Table 2 (no aggregation, FedAvg, max, FedAMP and the proposed
similarity weights at J = 1 and J = 5), the task-affinity heat map (Fig. 4), the per-round
curves (Fig. 5), the J sweeps per portfolio and overall (Figs. 6-7) at three softmax
temperatures tau (the paper gives none), the network-size sweep (Fig. 8), the payload per
exchange (Sec. V-B) and the radio study (Fig. 9: packet loss and latency against SNR for N = 10,
20, 30 with the 44.71 MB and 85.14 MB payloads).

On SynthScenes, the procedural stand-in for NYU-v2 (docs/protocols/dsc.md#mini-run), with the
routed mini ResNet: NYU-v2 itself runs with `--set dataset=nyuv2 --data-root DIR` where its files
are. Delta (Eq. 42-44) is taken against the same seed's no-aggregation run at the same point.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any

import yaml

from bench.reproduce.arms import Arm
from bench.reproduce.experiment import Figure, Recipe, Results
from bench.reproduce.graphs import topology_file
from bench.reproduce.measures import Measured, portfolio_deltas
from bench.seedstats import mean_ci
from launcher.config.layers import defaults_file
from protocols.dsc.depth import continuous_depth, deployed_depth, fit_constants
from protocols.dsc.dsc_summary import delta_keys
from topologies import generators as gen
from topologies.loader import load_topology, resolve_topology_path

PAPER = "dsc"
# Wall seconds per mesh-round here (2 cores, 10 nodes, the first-run scenes, one local epoch,
# J = 5 TDMA frames); an epoch more costs about 3 s.
SECONDS_PER_ROUND = 6.0
METHODS = {"No aggregation": "dsc-noagg", "FedAvg": "dsc-fedavg", "max": "dsc-max",
           "FedAMP": "dsc-fedamp", "Similarity": "dsc"}
NOAGG = "No aggregation"
TINY_SCENES = {"size": 16, "train_size": 200, "test_size": 40, "min_size": 12}
PAPER_SCENES = yaml.safe_load(defaults_file("dsc").with_name("dsc-paper.yaml").read_text())[
    "scenes"]
BACKBONES = {"S (ResNet-18)": 44706048, "L (ResNet-34)": 85138688}  # bytes per exchange
TASK_KEYS = {"seg": ("miou", "pacc"), "sn": ("mean", "median", "a11", "a22", "a30"),
             "dep": ("abs", "rel", "d1", "d2", "d3")}
TABLE = ("delta_all", "delta_seg", "delta_sn", "delta_dep", "task:seg:miou", "task:sn:mean",
         "task:dep:abs", "rho_mean")


@dataclass(frozen=True)
class Budget:
    rounds: int
    epochs: int
    seeds: tuple[int, ...]
    depths: tuple[int, ...]
    taus: tuple[float, ...]
    sizes: tuple[int, ...]
    snrs: tuple[float, ...]
    radio_rounds: int
    scenes: dict[str, Any] | None
    small: dict[str, Any]


BUDGETS = {
    "quick": Budget(rounds=1, epochs=1, seeds=(0,), depths=(1,), taus=(0.1,), sizes=(10,),
                    snrs=(10.0,), radio_rounds=1, scenes=TINY_SCENES,
                    small={"transport": "inproc"}),
    "medium": Budget(rounds=10, epochs=1, seeds=(0, 1, 2), depths=(1, 5, 15),
                     taus=(0.1, 0.5, 1.0), sizes=(10, 20), snrs=(0.0, 10.0, 20.0, 30.0),
                     radio_rounds=2, scenes=None, small={}),
    "paper": Budget(rounds=60, epochs=10, seeds=(0, 1, 2), depths=tuple(range(1, 16)),
                    taus=(0.1, 0.5, 1.0), sizes=(10, 20, 30), snrs=(0.0, 10.0, 20.0, 30.0),
                    radio_rounds=30, scenes=PAPER_SCENES, small={}),
}


def recipes(budget_name: str, out: Path, data_root: str | None) -> dict[str, Recipe]:
    b = BUDGETS[budget_name]
    common: dict[str, Any] = {"rounds": b.rounds, "eval_every": b.rounds,
                              "hyper.epochs": b.epochs, **b.small}
    if b.scenes is not None:
        common["scenes"] = b.scenes

    def topology(n: int) -> str:
        if n == 10:
            return "rgg10"
        return topology_file(out, f"rgg{n}", lambda: gen.random_geometric(
            n, 0.05, seed=0, grow=True, grow_step=0.01))

    def arm(method: str, at: dict[str, Any] | None = None, depth: int = 5, tau: float = 0.1,
            n: int = 10, settings: dict[str, Any] | None = None) -> Arm:
        return Arm(method, METHODS[method], topology(n), at or {},
                   {"hyper.depth": 1 if method == NOAGG else depth, "hyper.tau": tau,
                    **(settings or {})})

    def with_baseline(arms: Sequence[Arm]) -> tuple[Arm, ...]:
        """The arms and, per network size, the no-aggregation run their Delta is taken
        against (Delta compares the same clients and tasks: the same scenes too)."""
        sizes = sorted({a.at.get("N") for a in arms}, key=lambda x: x or 0)
        base = [arm(NOAGG, {"N": n} if n else {}, n=n or 10,
                    settings={k: v for a in arms if a.at.get("N") == n
                              for k, v in a.settings.items() if k == "scenes"})
                for n in sizes]
        return (*base, *arms)

    def pool(n: int, **changes: Any) -> dict[str, Any]:
        """The budget's scenes with enough training scenes for n nodes (each gets at least
        `min_size` under Dirichlet quantity skew: 60 per node keeps every seed's draw
        feasible)."""
        scenes = {**(b.scenes or {}), **changes}
        train = int(scenes.get("train_size", 800))
        return {**scenes, "train_size": max(train, 60 * n) if n > 10 else train}

    kind = "tiny" if b.scenes == TINY_SCENES else "paper-sized" if b.scenes else "first-run"
    notes = (f"SynthScenes ({kind} pool) for NYU-v2, the routed mini ResNet for "
             f"DeepLab-ResNet-34; {b.rounds} rounds "
             f"(paper: R = 60), E = {b.epochs} (paper: 10), seeds {list(b.seeds)} (paper: not "
             f"stated); tau = 0.1 unless swept (the paper gives none)",)

    def recipe(arms: tuple[Arm, ...], figure: Figure, columns: tuple[str, ...] = TABLE,
               extra_notes: tuple[str, ...] = (), **findings: Callable[[Results], str]) -> Recipe:
        return Recipe(arms, b.seeds, common, columns, figure, (*notes, *extra_notes),
                      {int(k.removeprefix("k")): v for k, v in findings.items()}, derive=derive)

    table2 = with_baseline([arm(m, {"J": j}, depth=j) for j in (1, 5) for m in METHODS
                            if m != NOAGG])
    sweep = with_baseline([arm("Similarity", {"J": j, "tau": t}, depth=j, tau=t)
                           for t in b.taus for j in b.depths])
    # Fig. 4's cells: a task pair's similarity, read from one run of the proposed method
    fig4 = tuple(Arm(
        f"{x}-{y}", "dsc", "rgg10", {"policies": scope},
        {"hyper.depth": 5, "hyper.tau": 0.1,
         **({"hyper.policy_scope": scope} if scope != "client" else {})})
        for scope in ("client", "task") for x, y in combinations(("seg", "sn", "dep"), 2))
    fig5 = (Arm("Similarity", "dsc", "rgg10", {"J": 5}, {"hyper.depth": 5, "hyper.tau": 0.1,
                                                          "eval_every": 1}),)
    # Fig. 8 is on Taskonomy: its portfolios (seg, sn, kp, edge), on pools sized for N
    fig8 = with_baseline([arm(m, {"N": n}, n=n, settings={
        "scenes": pool(n, portfolios="taskonomy")}) for n in b.sizes for m in METHODS
        if m != NOAGG])
    radio = {"schedule": "tdma", "link.loss_model": "outage", "rounds": b.radio_rounds,
             "hyper.epochs": 1}
    fig9 = tuple(Arm(name, "dsc", topology(n), {"N": n, "SNR": snr},
                     {**radio, "hyper.depth": 1, "hyper.payload_bytes": size,
                      "link.snr0_db": snr,
                      "scenes": {**TINY_SCENES, "train_size": 60 * n}})
                 for name, size in BACKBONES.items() for n in b.sizes for snr in b.snrs)
    cost = tuple(Arm(m, METHODS[m], "rgg10", {}, {"hyper.depth": 1, "rounds": 1,
                                                 "hyper.payload_bytes": BACKBONES[
                                                     "S (ResNet-18)"]})
                 for m in METHODS if m != NOAGG)
    return {
        "table2": recipe(table2, Figure("bars", "delta_all"), k3=perron_finding),
        "fig4": recipe(fig4, Figure("bars", "policy_similarity"),
                       ("policy_similarity",), ("policies: client = each client learns its "
                                                "own (the paper); task = shared per task",)),
        "fig5": recipe(fig5, Figure("curves", "accuracy"), ("avg_accuracy",),
                       ("one evaluation per round; the per-task metrics per round are in "
                        "each run's metrics.jsonl",)),
        "fig6": recipe(sweep, Figure("along", "delta_all", "J"),
                       ("delta_all", *(f"delta_group:{g}" for g in
                                       ("seg+dep", "seg+sn+dep", "seg+sn", "sn+dep")),
                        "rho_mean"), k0=tau_finding),
        "fig7": recipe(sweep, Figure("along", "delta_all", "J"), ("delta_all", "rho_mean"),
                       k0=tau_finding, k1=depth_finding),
        "fig8": recipe(fig8, Figure("along", "delta_all", "N"), ("delta_all", "rho_mean"),
                       ("SynthScenes with Taskonomy-like portfolios (seg, sn, kp, edge), 60 "
                        "training scenes per node beyond N = 10",), k6=density_finding),
        "comm-cost": recipe(cost, Figure("bars", "bytes_per_exchange"),
                            ("bytes_per_exchange", "policy_bytes_per_exchange"),
                            ("psi charged at ResNet-18's 44,706,048 bytes "
                             "(hyper.payload_bytes); the real mini backbone travels",),
                            k4=payload_finding, k5=payload_finding),
        "fig9": recipe(fig9, Figure("along", "virtual_seconds", "SNR"),
                       ("packet_loss_probability", "virtual_seconds"),
                       (f"{b.radio_rounds} rounds, J = 1, the outage channel of each link's "
                        "distance and SNR_0 (docs/protocols/dsc.md), tiny scenes (60 per node):"
                        " only the channel is measured",)),
    }


def derive(results: Results) -> None:
    """Delta against the same seed's no-aggregation run at the same point (N), the clients'
    mean task metrics, the policy similarity of a task pair (Fig. 4) and the bytes of one
    exchange (Sec. V-B)."""
    bases = {a.at.get("N", 10): ms for a, ms in results.items() if a.method == NOAGG}
    for a, ms in results.items():
        base = bases.get(a.at.get("N", 10))
        for i, m in enumerate(ms):
            tasks = {int(n): t for n, t in (m.summary.get("task_metrics") or {}).items()}
            for task, keys in TASK_KEYS.items():
                for key in keys:
                    values = [t[task][key] for t in tasks.values() if task in t]
                    if values:
                        m.scalars[f"task:{task}:{key}"] = sum(values) / len(values)
            if base is not None and i < len(base) and tasks:
                ref = {int(n): t for n, t in base[i].summary["task_metrics"].items()}
                keys_ = delta_keys(tasks, ref)
                if keys_.get("delta_all") is not None:
                    m.scalars["delta_all"] = keys_["delta_all"]
                    m.scalars |= {f"delta_{t}": v for t, v in keys_["delta_tasks"].items()}
                    m.scalars |= portfolio_deltas({**keys_, "task_metrics": m.summary[
                        "task_metrics"]})
            if "-" in a.method:
                m.scalars["policy_similarity"] = policy_similarity(m, *a.method.split("-"))
            exchange_bytes(m)


def policy_similarity(m: Measured, first: str, second: str) -> float:
    """Eq. 7's cosine of two tasks' binary policies, over every pair of clients holding them
    (a client holding both included): the heat map's cell for the task pair."""
    policies = m.summary.get("policies") or {}
    a = [p[first] for p in policies.values() if first in p]
    b = [p[second] for p in policies.values() if second in p]
    sims = [cosine(u, v) for u in a for v in b]
    return sum(sims) / len(sims) if sims else math.nan


def cosine(u: Sequence[float], v: Sequence[float]) -> float:
    norm = math.sqrt(sum(x * x for x in u) * sum(y * y for y in v))
    return sum(x * y for x, y in zip(u, v, strict=True)) / norm if norm else 0.0


def first_round(m: Measured) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The formula bits and the wire ledger of the run's first round, and its depth J."""
    bits = ((m.summary.get("formula") or {}).get("per_round") or {}).get("0") or {}
    ledger = ((m.summary.get("ledger") or {}).get("per_round") or {}).get("0") or {}
    depth = int(((m.summary.get("config") or {}).get("hyper") or {}).get("depth", 1))
    return bits, ledger, depth


def params_messages(m: Measured) -> float | None:
    """The PARAMS messages of the first round: a round sends J PARAMS frames and, for max and
    the proposed method, one POLICY frame, each a message per directed link."""
    bits, ledger, depth = first_round(m)
    if not bits or not ledger.get("messages"):
        return None
    return ledger["messages"] * depth / (depth + (1 if bits.get("policy") else 0))


def exchange_bytes(m: Measured) -> None:
    """The formula bytes of one client-to-neighbour PARAMS message and of one policy message
    in the first round (docs/protocols/dsc.md, payload accounting)."""
    bits, _, depth = first_round(m)
    params = params_messages(m)
    if params is None:
        return
    m.scalars["bytes_per_exchange"] = bits.get("params", 0) / 8 / params
    m.scalars["policy_bytes_per_exchange"] = bits.get("policy", 0) / 8 / (params / depth)


def tau_finding(results: Results) -> str:
    """How much of its own model each node keeps, and rho(W), at each tau."""
    parts = []
    for a, ms in results.items():
        if a.method == "Similarity" and a.at.get("J") == min(
                x.at.get("J", 99) for x in results if x.method == "Similarity"):
            rho = [m.scalars["rho_mean"] for m in ms if "rho_mean" in m.scalars]
            if rho:
                parts.append(f"tau = {a.at.get('tau')}: rho(W) = {sum(rho) / len(rho):.4f}")
    return "; ".join(parts) or "no Similarity run here"


def depth_finding(results: Results) -> str:
    """Eq. 41's J* from the J sweep at each tau (A and alpha B fitted to -Delta_all with the
    runs' measured rho, dfl-launch jstar's fit), beside the best J measured."""
    parts = []
    for tau in sorted({a.at["tau"] for a in results if "tau" in a.at}):
        means = {int(a.at["J"]): mean_ci([m.scalars["delta_all"] for m in ms
                                          if "delta_all" in m.scalars])[0]
                 for a, ms in results.items() if a.at.get("tau") == tau and "J" in a.at}
        rhos = [m.scalars["rho_mean"] for a, ms in results.items() if a.at.get("tau") == tau
                for m in ms if "rho_mean" in m.scalars]
        means = {j: v for j, v in means.items() if not math.isnan(v)}
        if len(means) < 3 or not rhos:
            continue
        rho = sum(rhos) / len(rhos)
        best = max(means, key=lambda j: means[j])
        if not 0 < rho < 1:
            parts.append(f"tau = {tau}: rho(W) = {rho:.4f}, no J* (Eq. 41 needs rho < 1); "
                         f"best measured J = {best}")
            continue
        fit = fit_constants(list(means), [-means[j] for j in means], rho)
        star = continuous_depth(fit.a, fit.ab, rho)
        parts.append(f"tau = {tau}: rho(W) = {rho:.4f}, fitted A = {fit.a:.3g}, alpha B = "
                     f"{fit.ab:.3g}, J* = {star:.2f} -> deployed J = "
                     f"{deployed_depth(fit.a, fit.ab, rho, max(means))}; best measured J = "
                     f"{best}")
    return "; ".join(parts) or "fewer than three depths here: no J* fit"


def density_finding(results: Results) -> str:
    """The mean degree of the graphs the N sweep ran on: the paper's 'fixed density' against
    a radius grown to connectivity."""
    degrees = {}
    for a in results:
        if "N" in a.at:
            t = load_topology(resolve_topology_path(a.topology))
            degrees[int(a.at["N"])] = 2 * len(t.edges) / len(t.nodes)
    return "; ".join(f"N = {n}: mean degree {d:.1f}" for n, d in sorted(degrees.items())) \
        or "no N sweep here"


def payload_finding(results: Results) -> str:
    """What one exchange carries: the charged backbone and the real one that travelled."""
    parts = []
    for a, ms in results.items():
        m = ms[0]
        charged = m.scalars.get("bytes_per_exchange")
        params = params_messages(m)
        if charged and params:
            parts.append(f"{a.method}: {charged:,.0f} B charged per exchange (the whole shared "
                         f"backbone, every exchange); the mini backbone really sent about "
                         f"{first_round(m)[1]['payload_bytes'] / params:,.0f} B per PARAMS "
                         "message")
    return "; ".join(parts) or "no run here"


def perron_finding(results: Results) -> str:
    """The Perron scaling N v_i of the last W of the proposed method (1 everywhere would be
    row-stochastic)."""
    for a, ms in results.items():
        if a.method == "Similarity" and ms and ms[0].summary.get("perron_nv"):
            nv = ms[0].summary["perron_nv"]
            return (f"{a.label()}, seed {0}: N v_i ranges over [{min(nv):.3f}, {max(nv):.3f}]"
                    " (W^J tends to v 1^T: models drift to N v_i times the mean)")
    return "no Similarity run here"

