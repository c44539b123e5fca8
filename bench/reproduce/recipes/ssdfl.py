"""SSD-FL's experiments (Sec. VI and App. G): the tau_a sweeps (Figs. 2-3, 10), the tau_r
tables (I-VI: cycles to the accuracy thresholds), the network-size sweeps (Figs. 4-5, 11), the
graph families (Figs. 6-7, 12), the link-probability sweeps (Figs. 8-9) and Algorithm 1's H
against S (Figs. 13-14), each on FMNIST or CIFAR-10 as the paper ran it, SSD-FL against sDFL,
pDFL, STC and cSTC with the same init, batches and optimizer draw per seed.

A budget keeps every axis value the paper names (paper), a subset of them (medium), or only the
first (quick: a smoke run of every experiment); the points of an arm (`at`) are the paper's
axes: tau_a, tau_r, N, graph, p, level (mild: 3 labels per device; extreme: 1), optimizers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from bench.reproduce.arms import Arm
from bench.reproduce.experiment import Figure, Recipe, Results
from bench.reproduce.graphs import topology_file
from topologies import generators as gen
from topologies.model import Topology

PAPER = "ssd-fl"
# Wall seconds per mesh-cycle here (2 cores, 30 devices, the small CNN, 2 local steps per
# iteration, tau_a 3 + tau_r 1; the paper's CNN with an epoch per iteration costs about 50x more,
# docs/protocols/ssd-fl.md).
SECONDS_PER_ROUND = 3.0
METHODS = {"SSD-FL": "ssd-fl", "sDFL": "sdfl", "pDFL": "pdfl", "STC": "stc", "cSTC": "cstc"}
LEVELS = {"mild": ("shards:3", (0.65, 0.72)), "extreme": ("shards:1", (0.40, 0.45))}
TABLE = ("avg_accuracy", "worst_accuracy", "avg_model_accuracy", "s_star")


@dataclass(frozen=True)
class Budget:
    cycles: int
    seeds: tuple[int, ...]
    local_steps: int | str
    eval_size: int
    model: str
    keep: Callable[[Sequence[Any]], list[Any]]
    """Which of a numeric axis's values this budget runs (tau_a, tau_r, N, p)."""
    keep_kinds: Callable[[Sequence[Any]], list[Any]]
    """Which of a categorical axis's values it runs (graph families, non-iid levels)."""
    n_default: int
    small: dict[str, Any]


def first(values: Sequence[Any]) -> list[Any]:
    return list(values[:1])


def ends(values: Sequence[Any]) -> list[Any]:
    return list(values) if len(values) <= 2 else [values[0], values[-1]]


def every(values: Sequence[Any]) -> list[Any]:
    return list(values)


BUDGETS = {
    "quick": Budget(cycles=1, seeds=(0,), local_steps=1, eval_size=100, model="auto",
                    keep=first, keep_kinds=first, n_default=6, small={"transport": "inproc"}),
    "medium": Budget(cycles=8, seeds=(0, 1, 2), local_steps=2, eval_size=500, model="auto",
                     keep=ends, keep_kinds=every, n_default=30, small={}),
    "paper": Budget(cycles=20, seeds=(0, 1, 2), local_steps="epoch", eval_size=10000,
                    model="ssdfl-cnn", keep=every, keep_kinds=every, n_default=30, small={}),
}
GRAPHS: dict[str, Callable[[int], Topology]] = {
    "RNG": lambda n: gen.erdos_renyi(n, 0.1, seed=0),
    "PrefA": lambda n: gen.barabasi_albert(n, 1, seed=0),
    "RGeo": lambda n: gen.random_geometric(n, 0.2, seed=0),
    "WS": lambda n: gen.watts_strogatz(n, 3, 0.2, seed=0),
    "Comp": lambda n: gen.complete(n),
}


def recipes(budget_name: str, out: Path, data_root: str | None) -> dict[str, Recipe]:
    b = BUDGETS[budget_name]
    small = b.n_default < 10  # quick: every N shrinks with it

    def graph(name: str, n: int, p: float = 0.1) -> str:
        n = min(n, b.n_default) if small else n
        if name == "RNG" and p != 0.1:
            return topology_file(out, f"er{n}-p{p:g}", lambda: gen.erdos_renyi(n, p, seed=0))
        return topology_file(out, f"{name.lower()}{n}", lambda: GRAPHS[name](n))

    def arms(dataset: str, methods: Sequence[str] = tuple(METHODS), tau_a: Sequence[int] = (3,),
             tau_r: Sequence[int] = (1,), n: Sequence[int] = (30,),
             graphs: Sequence[str] = ("RNG",), p: Sequence[float] = (0.1,),
             levels: Sequence[str] = ("mild", "extreme"), optimizers: str = "random",
             cycles: int | None = None, tagged: bool = False) -> tuple[Arm, ...]:
        """Every method at every kept point; `tagged`: the dataset is an axis too (a figure
        with an FMNIST and a CIFAR-10 panel)."""
        out_arms = []
        for level in b.keep_kinds(levels):
            partition, thresholds = LEVELS[level]
            for ta in b.keep(tau_a):
                for tr in b.keep(tau_r):
                    for size in b.keep(n):
                        for g in b.keep_kinds(graphs):
                            for prob in b.keep(p):
                                at: dict[str, Any] = {"level": level}
                                if tagged:
                                    at["dataset"] = dataset
                                at |= {k: v for k, v, axis in (
                                    ("tau_a", ta, tau_a), ("tau_r", tr, tau_r), ("N", size, n),
                                    ("graph", g, graphs), ("p", prob, p)) if len(axis) > 1}
                                settings = {
                                    "dataset": dataset, "partition": partition,
                                    "hyper.tau_a": ta, "hyper.tau_r": tr,
                                    "hyper.optimizers": optimizers,
                                    "cycle_metrics": {"params_every": 1,
                                                      "thresholds": list(thresholds)}}
                                if cycles is not None:
                                    settings["rounds"] = cycles
                                if dataset == "cifar10" and data_root:
                                    settings["data_root"] = data_root
                                topology = graph(g, size, prob)
                                out_arms += [Arm(m, METHODS[m], topology, at, settings)
                                             for m in methods]
        return tuple(out_arms)

    common: dict[str, Any] = {"rounds": b.cycles, "eval_every": 1, "eval_size": b.eval_size,
                              "model": {"name": b.model}, "hyper.local_steps": b.local_steps,
                              **b.small}
    notes: tuple[str, ...] = (
             f"{b.cycles} cycles (paper: 20), {b.local_steps} mini-batch steps per iteration "
             f"(paper: not stated), model {b.model} (paper: the five-layer CNN, ssdfl-cnn), "
             f"a global test subset of {b.eval_size}, seeds {list(b.seeds)} (paper: not "
             "stated); axes cut to " + {"quick": "their first value (a smoke run)",
                                         "medium": "their two ends",
                                         "paper": "every value the paper names"}[budget_name],)
    if small:
        notes = (*notes, f"every graph has at most {b.n_default} devices (a smoke run)")

    def recipe(arms_: tuple[Arm, ...], figure: Figure, columns: tuple[str, ...] = TABLE,
               **findings: Callable[[Results], str]) -> Recipe:
        return Recipe(arms_, b.seeds, common, columns, figure, notes,
                      {int(k.removeprefix("k")): v for k, v in findings.items()})

    tau_a, sizes, probs = (1, 2, 3, 4, 5), (10, 20, 30, 40, 50), (0.1, 0.2, 0.3, 0.4, 0.5)
    families = tuple(GRAPHS)
    cycles_cols = ("avg_accuracy", "cycles_to_0.4", "cycles_to_0.45", "cycles_to_0.65",
                   "cycles_to_0.72")
    out_: dict[str, Recipe] = {}
    for fig, data, opt in (("fig2", "fmnist", "random"), ("fig3", "cifar10", "random")):
        out_[fig] = recipe(arms(data, tau_a=tau_a, n=(10,), optimizers=opt),
                           Figure("along", "avg_accuracy", "tau_a"))
    out_["fig10"] = recipe(sum((arms(d, tau_a=tau_a, n=(10,), optimizers="sgd", tagged=True)
                                for d in ("fmnist", "cifar10")), ()),
                           Figure("along", "avg_accuracy", "tau_a"))
    for table, data, opt, taus in (("table1", "fmnist", "random", (3, 5)),
                                   ("table2", "cifar10", "random", (3, 5)),
                                   ("table3", "fmnist", "both", (1,)),
                                   ("table4", "fmnist", "sgd", (3, 5)),
                                   ("table5", "cifar10", "both", (1,)),
                                   ("table6", "cifar10", "sgd", (3, 5))):
        opts = ("random", "sgd") if opt == "both" else (opt,)
        arms_ = sum((arms(data, tau_r=taus, n=(10,), optimizers=o) for o in opts), ())
        if opt == "both":
            arms_ = tuple(Arm(a.method, a.protocol, a.topology,
                              {**a.at, "optimizers": a.settings["hyper.optimizers"]},
                              a.settings) for a in arms_)
        out_[table] = recipe(arms_, Figure("bars", "avg_accuracy"), cycles_cols)
    for fig, data, opt in (("fig4", "fmnist", "random"), ("fig5", "cifar10", "random")):
        out_[fig] = recipe(arms(data, n=sizes, optimizers=opt), Figure("along", "avg_accuracy",
                                                                         "N"))
    out_["fig11"] = recipe(sum((arms(d, n=sizes, optimizers="sgd", tagged=True)
                                for d in ("fmnist", "cifar10")), ()),
                           Figure("along", "avg_accuracy", "N"))
    # five families x five methods: below the paper budget, the mild level only (30 minutes)
    levels = ("mild", "extreme") if budget_name == "paper" else ("mild",)
    for fig, data in (("fig6", "fmnist"), ("fig7", "cifar10")):
        out_[fig] = recipe(arms(data, graphs=families, levels=levels),
                           Figure("bars", "avg_accuracy"), k0=s_star_finding)
    out_["fig12"] = recipe(sum((arms(d, graphs=families, optimizers="sgd", levels=levels,
                                     tagged=True) for d in ("fmnist", "cifar10")), ()),
                           Figure("bars", "avg_accuracy"), k0=s_star_finding)
    for fig, opt in (("fig8", "random"), ("fig9", "sgd")):
        out_[fig] = recipe(sum((arms(d, p=probs, levels=("mild",), optimizers=opt, tagged=True)
                                for d in ("fmnist", "cifar10")), ()),
                           Figure("along", "avg_accuracy", "p"))
    # H against S: Algorithm 1's pre-phase alone decides it, so one cycle is enough at any
    # budget; N is not stated, the default graph (ER(30, 0.1)) is used.
    for fig, opt in (("fig13", "random"), ("fig14", "sgd")):
        out_[fig] = recipe(arms("fmnist", methods=("SSD-FL",), tau_a=tau_a, optimizers=opt,
                                cycles=1), Figure("curves", "objective_H", axis="S"),
                           ("s_star",), k1=h_finding)
    return out_


def s_star_finding(results: Results) -> str:
    """Algorithm 1's S* on the complete graph, beside the paper's S* = 1."""
    stars = [f"{a.label()}: S* = {sorted({int(m.scalars['s_star']) for m in ms})}"
             for a, ms in results.items() if a.method == "SSD-FL" and a.at.get("graph") == "Comp"
             and all("s_star" in m.scalars for m in ms)]
    return "; ".join(stars) + " (the paper: S* = 1)" if stars else "no complete graph here"


def h_finding(results: Results) -> str:
    """Where H is smallest, against the paper's interior minimum."""
    parts = []
    for a, ms in results.items():
        for m in ms[:1]:
            h = m.series.get("S", {}).get("objective_H", {})
            if h:
                best = min(h, key=lambda s: h[s])
                xs = sorted(h)
                falls = all(h[x] >= h[y] for x, y in pairwise(xs))
                parts.append(f"{a.label()}: H is smallest at S = {best:g} of {xs[0]:g}.."
                             f"{xs[-1]:g}" + (", falling at every step" if falls else ""))
    return "; ".join(parts) or "no H here"
