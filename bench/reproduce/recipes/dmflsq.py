"""DMFL-SQ's CIFAR-10 experiments (Sec. VI: Figs. 2-7, and Table III's ablations on CIFAR-10 as
a proxy for MUSMET): the five protocols and the ablations of bench/sweeps/dmflsq.yaml, the
theta_0 sweep, and the ring / ER(0.5) / RGG(0.4) graphs.

Every run evaluates both ways (`eval_split: both`): the paper does not say whether a client is
tested on its own Dirichlet split or on the global test set, so the tables give the own-split
keys (avg_accuracy, ...) and the global ones (global_avg_accuracy, ...) from the same models.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench import sweeps
from bench.reproduce.arms import Arm
from bench.reproduce.deviations import Stated, classifier_parameters
from bench.reproduce.experiment import Cost, Figure, Recipe, Results
from bench.reproduce.graphs import topology_file
from bench.seedstats import mean_ci
from dfl_node.settings.data_section import DEFAULT_EVAL_SIZE
from protocols.dmflsq.declarations import DMFLSQHyper
from protocols.toolkit.accounting import MessageAccounting, message_bits
from topologies import generators as gen

PAPER = "dmfl-sq"
# Measured here (2 cores, 20 clients on the ring): a round of the 2.1M-parameter CNN per
# protocol, and an evaluation of the 20 clients on their own splits (about 500 images each);
# the global subset adds its images at the same rate. The MUSMET-sized MLP's rounds are
# mostly DMFL-SQ's ten max-consensus steps.
CIFAR_ROUND = {"dmfl-sq": 1.74, "d-psgd": 1.07, "dsgt": 1.21, "choco-sgd": 2.25, "qffl": 0.96}
OWN_SPLIT_EVAL = 6.5
# A budget that evaluates the clients' own splits only still evaluates the shared-model
# baselines (D-PSGD, DSGT, CHOCO-SGD, q-FFL) on a global subset this large: their consensus
# cannot fit each client's skew, so whether they trained shows there (experiment.not_trained).
GLOBAL_CHECK_SIZE = 300
DENSE_GRAPH_ROUND = 2.1
MUSMET_COST = Cost({"*": 0.25}, per_eval=0.3, start=4.0)
# An evaluation of the MLP costs little, so medium and paper evaluate alike and share their
# MUSMET-sized runs (both run T = 500).
MUSMET_EVAL_EVERY = 25

THETA0 = DMFLSQHyper().theta0
"""The paper's theta_0 (0.5), DMFL-SQ's default: an arm off Fig. 3's axis runs with it."""


def cifar_cost(eval_split: str, eval_size: int) -> Cost:
    """Under eval_split local the shared-model baselines still evaluate the global subset of
    GLOBAL_CHECK_SIZE (recipes: what shows that they trained)."""
    def per_eval(images: int) -> float:
        return OWN_SPLIT_EVAL * (500 + images) / 500

    if eval_split == "both":
        return Cost(CIFAR_ROUND, per_eval=per_eval(eval_size), start=6.0)
    return Cost(CIFAR_ROUND, per_eval={"dmfl-sq": per_eval(0), "*": per_eval(GLOBAL_CHECK_SIZE)},
                start=6.0)
# The paper's method names for the sweep's variants (bench/sweeps/dmflsq.yaml).
METHODS = {"dsgt": "DSGT", "q-ffl": "q-FFL", "d-psgd": "D-PSGD", "choco-sgd": "CHOCO-SGD",
           "dmfl-sq": "DMFL-SQ", "no-fairness-rho-0": "DMFL-SQ rho=0",
           "no-coupling-alpha-0": "DMFL-SQ alpha=0",
           "no-event-triggering": "DMFL-SQ no event-triggering",
           "no-sparsification": "DMFL-SQ no sparsification",
           "no-quantization": "DMFL-SQ no quantization"}
BASELINES = ("D-PSGD", "DSGT", "CHOCO-SGD", "q-FFL")
ABLATIONS = ("DMFL-SQ rho=0", "DMFL-SQ alpha=0", "DMFL-SQ no event-triggering",
             "DMFL-SQ no sparsification", "DMFL-SQ no quantization")
TABLE = ("avg_accuracy", "worst_accuracy", "bottom10_accuracy", "std_accuracy", "jain_index",
         "cvar10_loss", "bits_per_client", "global_avg_accuracy", "global_worst_accuracy")
MUSMET_TABLE = ("avg_accuracy", "worst_accuracy", "bottom10_accuracy", "jain_index",
                "bits_per_client", "trigger_rate")
# The MUSMET-sized task: 20 musicians' Welch PSD band features (P = 50,564 for the paper's
# 3-layer MLP [256, 128] means 66 inputs: q-FFL's 2TPb_fp = 1618.0 Mbit gives P) in 4
# emotion classes, every musician holding all four; here Gaussian class blobs of that size,
# split evenly (the real recordings' per-musician shift cannot be generated faithfully, and
# the bits and trigger columns this proxy answers do not depend on it).
MUSMET = {"dataset": "synthetic", "partition": "iid", "eval_split": "local",
          "synthetic": {"classes": 4, "features": 66, "train_size": 8000, "test_size": 2000,
                        "noise": 4.5},
          "model": {"name": "mlp", "hidden": [256, 128]}}
MUSMET_PROXY = ("a generated 4-class task of MUSMET's size (66 features, 20 clients of 400 "
                "training windows each, the paper's 66-256-128-4 MLP, P = 50,564) instead of "
                "the MUSMET EEG recordings, which cannot be obtained here; it answers the "
                "bits and trigger columns (they depend on P, the graph, T and the trigger), "
                "not the accuracy ones")


@dataclass(frozen=True)
class Budget:
    rounds: int
    seeds: tuple[int, ...]
    eval_every: int
    clients: int
    theta0: tuple[float, ...]
    musmet_rounds: int
    graphs: tuple[str, ...] = ("ring", "er", "rgg")
    """Fig. 7's graphs (a sweep point cut is a graph left out)."""
    cuts: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Per experiment, the methods its claims name that this budget does not run."""
    eval_split: str = "both"
    """The CIFAR-10 runs' test sets: the paper does not say whether a client is tested on its
    own split or on the global test set, so `both` reports the two from the same models."""
    small: dict[str, Any] | None = None
    """quick only: the settings that make it a smoke run (a small model, a small global
    subset, nodes as threads, a checkpoint every round so that its 2 rounds have one to resume
    from: the slow suite interrupts one, tests/test_reproduce_slurm.py); None: the paper's CNN
    (P = 2,122,186) as processes."""
    why: tuple[tuple[str, str], ...] = ()
    """Why this budget's settings differ from the paper's (deviations.SETTINGS)."""


SMOKE = "a smoke run of the code path, not a measurement"
BUDGETS = {
    "quick": Budget(rounds=2, seeds=(0,), eval_every=1, clients=6, theta0=(0.5, 5.0),
                    musmet_rounds=2, small={"model": {"name": "auto"}, "eval_size": 200,
                                            "transport": "inproc", "checkpoint_every": 1},
                    why=(("rounds", SMOKE), ("model", SMOKE), ("P", SMOKE), ("N", SMOKE),
                         ("graph", SMOKE))),
    # At most 60 minutes per experiment here, the proposed method trained: by round 140
    # DMFL-SQ's clients did not beat their majority-class share (0.62-0.64) on every seed
    # (seed 1: 0.640 against 0.636), so medium runs 250 rounds and cuts methods and sweep
    # points instead: a round of the 2.1M-parameter CNN costs 1.0-2.3 s a protocol here, and an
    # evaluation of the 20 clients' own splits 6.5 s (the global subset would double it).
    "medium": Budget(rounds=250, seeds=(0, 1, 2), eval_every=50, clients=20,
                     theta0=(0.1, 2.0), musmet_rounds=500, eval_split="local",
                     graphs=("ring", "er"),
                     cuts=(("fig2", ("CHOCO-SGD",)), ("fig6", ("DSGT", "CHOCO-SGD"))),
                     why=(("rounds", "250 of T = 500 rounds: by round 140 DMFL-SQ's clients did "
                                     "not beat their majority-class share on every seed; "
                                     "methods and sweep points are cut instead, to keep an "
                                     "experiment within 60 minutes here"),
                          ("test set", "the clients' own splits only: evaluating 20 CNNs on "
                                       "the global subset as well doubles an evaluation's "
                                       "cost (the paper budget does both)"),
                          ("graph", "Fig. 7: the ring and ER(0.5) only (RGG(0.4) is cut to "
                                    "keep the hour)"))),
    # An evaluation of 20 clients on their own splits and the 2,000-image global subset
    # costs more here than 10 rounds of training: every 25 rounds gives 21 points a curve.
    "paper": Budget(rounds=500, seeds=(0, 1, 2), eval_every=25, clients=20,
                    theta0=(0.1, 0.5, 2.0), musmet_rounds=500),
}


def stated(musmet: bool) -> dict[str, Stated]:
    """What the paper states for its CIFAR-10 (or MUSMET) experiments (Sec. VI)."""
    lr = {"DMFL-SQ": 0.1, "D-PSGD": 0.035, "CHOCO-SGD": 0.018, "DSGT": "0.045/sqrt(t+1)",
          "q-FFL": 0.18,
          **{a: 0.1 for a in ABLATIONS}}
    common = {
        "rounds": Stated("T = 500 ('the same fixed training horizon' for all methods)", 500),
        "epochs": Stated("not stated: one local update per round"),
        "local steps": Stated("1 (one local optimization update per round)"),
        "lr": Stated("DMFL-SQ 0.1; D-PSGD 0.035; CHOCO-SGD 0.018; DSGT 0.045/sqrt(t+1); "
                     "q-FFL 0.18", lr),
        "batch": Stated("32 (DMFL-SQ: a selection and a gradient batch of 32 each)", 32),
        "N": Stated("20", 20),
        "graph": Stated("a ring unless otherwise specified (Fig. 7: ER(p = 0.5), RGG(r = 0.4))"),
    }
    if musmet:
        return {**common,
                "model": Stated("3-layer MLP, hidden [256, 128]", "mlp"),
                "P": Stated("50,564 (q-FFL's 2TPb_fp = 1618.0 Mbit at T = 500)", 50_564),
                "split": Stated("each musician's own recordings (all four conditions)"),
                "test set": Stated("each musician's last 20% of windows, chronologically"),
                "seeds": Stated("5 (R = 5 in Tables II and III)")}
    return {**common,
            "model": Stated("a CNN of two convolutional and two fully connected layers "
                            "(sizes not stated)", "dmflsq-cnn"),
            "P": Stated("not stated; omega = 8.37e-3 at k/P = 0.01 gives 2,122,186",
                        2_122_186),
            "split": Stated("Dirichlet(alpha = 0.1) over the 50k training images",
                            "dirichlet:0.1"),
            "test set": Stated("the 10k test split (a client's own part of it or all of it: "
                               "not stated)"),
            "seeds": Stated("not stated for CIFAR-10 (5 for MUSMET)")}


def graphs(budget: Budget, out: Path) -> dict[str, str]:
    """ring, ER(p = 0.5), RGG(r = 0.4): the shipped 20-node ones, or small ones for quick."""
    if budget.clients == 20:
        return {"ring": "ring20", "er": "er20-p05", "rgg": "rgg20-r04"}
    n = budget.clients
    return {"ring": topology_file(out, f"ring{n}", lambda: gen.ring(n)),
            "er": topology_file(out, f"er{n}-p05", lambda: gen.erdos_renyi(n, 0.5, seed=0)),
            "rgg": topology_file(out, f"rgg{n}-r04",
                                 lambda: gen.random_geometric(n, 0.4, seed=0, grow=True))}


def recipes(budget_name: str, out: Path, data_root: str | None) -> dict[str, Recipe]:
    budget = BUDGETS[budget_name]
    spec = sweeps.load("dmflsq")
    common: dict[str, Any] = {**spec.settings, "eval_split": budget.eval_split,
                              "eval_at_start": True,
                              "rounds": budget.rounds,
                              "eval_every": budget.eval_every, **(budget.small or {})}
    if data_root:
        common["data_root"] = data_root
    musmet_common: dict[str, Any] = {
        **spec.settings, **MUSMET, "eval_at_start": True, "rounds": budget.musmet_rounds,
        "eval_every": MUSMET_EVAL_EVERY if budget.small is None else budget.eval_every,
        **{k: v for k, v in (budget.small or {}).items()
                                            if k in ("transport", "checkpoint_every")}}
    g = graphs(budget, out)
    why = dict(budget.why)
    split_why = ("at least 64 samples per client (two batches of 32, as DMFL-SQ draws), "
                 "which the paper does not state")

    def arm(variant: str, topology: str = g["ring"], **at: Any) -> Arm:
        v = next(x for x in spec.variants if x.name == variant)
        # theta_0 = 0.5 is the config's own: that arm is the DMFL-SQ run of the other figures
        settings = {"hyper.theta0": at["theta0"]} if at.get("theta0", THETA0) != THETA0 else {}
        shared = METHODS[variant] in BASELINES
        if shared and budget.eval_split == "local":
            settings |= {"eval_split": "both", "eval_size": GLOBAL_CHECK_SIZE}
        return Arm(METHODS[variant], v.protocol, topology, at, {**v.settings, **settings},
                   v.config, shared_model=shared)

    main = (arm("dmfl-sq"), arm("d-psgd"), arm("dsgt"), arm("choco-sgd"), arm("q-ffl"))
    ablations = tuple(arm(v) for v in METHODS if METHODS[v] in ABLATIONS)
    notes = (*(() if budget.small is None else (
        f"a smoke run: {budget.small} instead of the paper's CNN and the 2,000-image subset",)),
        f"{budget.rounds} rounds (paper: T = 500), seeds {list(budget.seeds)} (not stated "
             f"for CIFAR-10), {budget.clients} clients, an evaluation every "
             f"{budget.eval_every} rounds and before the first; each client on its own "
             "Dirichlet split" + (" and on the global subset (global_*)"
                                  if budget.eval_split == "both" else ""),)

    cuts = dict(budget.cuts)
    cut_why = ("not run at the medium budget: the experiment's hour goes to rounds, so that "
               "DMFL-SQ trains; the paper budget runs it")

    def recipe(arms: tuple[Arm, ...], figure: Figure, columns: tuple[str, ...] = TABLE,
               experiment: str = "", **findings: Any) -> Recipe:
        cut = cuts.get(experiment, ())
        return Recipe(tuple(a for a in arms if a.method not in cut), budget.seeds, common,
                      columns, figure, notes,
                      {int(k.removeprefix("k")): v for k, v in findings.items()},
                      stated=stated(musmet=False),
                      why={**{k: v for k, v in why.items() if k != "graph"}, "split": split_why},
                      cut={m: cut_why for m in cut},
                      cost=cifar_cost(budget.eval_split,
                                      int(common.get("eval_size", DEFAULT_EVAL_SIZE))))

    def on_musmet(recipe_: Recipe) -> Recipe:
        """The same arms on the MUSMET-sized task, judged as a proxy."""
        musmet_why = {k: v for k, v in why.items() if k not in ("rounds", "test set")}
        if budget.musmet_rounds != 500:
            musmet_why["rounds"] = why["rounds"]
        return replace(
            recipe_, common=musmet_common, columns=MUSMET_TABLE, stated=stated(musmet=True),
            cost=MUSMET_COST, cut={},
            why={**musmet_why, "seeds": "3 seeds, as every experiment here (the paper: 5)",
                 "split": "generated class blobs shared out evenly: a musician's own "
                          "recordings cannot be generated faithfully",
                 "test set": "a generated task has no chronology: each client's test split "
                             "is drawn like its training split"},
            proxy=MUSMET_PROXY,
            notes=(f"{budget.musmet_rounds} rounds (paper: T = 500), seeds "
                   f"{list(budget.seeds)} (paper: 5), {budget.clients} clients, an evaluation "
                   f"every {musmet_common['eval_every']} rounds and before the first",))

    theta = tuple(arm("dmfl-sq", theta0=t) for t in budget.theta0)
    fig2 = recipe(main[:4], Figure("curves", "accuracy", "bits_per_client"), experiment="fig2",
                  k0=trigger_finding)
    fig3 = recipe(theta, Figure("along", "bits_per_client", "theta0"),
                  ("avg_accuracy", "bits_per_client", "trigger_rate", "train_loss"),
                  k0=trigger_finding)
    fig7 = recipe(tuple(arm("dmfl-sq", g[k], graph=k) for k in budget.graphs),
                  Figure("curves", "accuracy"),
                  ("avg_accuracy", "worst_accuracy", "bits_per_client"))
    if "graph" in why:
        fig7 = replace(fig7, why={**fig7.why, "graph": why["graph"]})
    # a round on ER(0.5) (about 9.5 neighbours' copies) or RGG(0.4) costs more than the ring's
    fig7 = replace(fig7, cost=replace(fig7.cost, per_round={
        **fig7.cost.per_round, "dmfl-sq": DENSE_GRAPH_ROUND}))
    # MUSMET-sized runs cost little: the whole theta_0 sweep at every budget
    every_theta = tuple(arm("dmfl-sq", theta0=t) for t in (0.1, 0.5, 2.0)) \
        if budget.small is None else theta
    return {
        "fig2": fig2,
        "fig3": fig3,
        "fig4": recipe(main[:2], Figure("curves", "train_loss"),
                       ("train_loss", "avg_accuracy")),
        "fig5": recipe((main[0], ablations[0]), Figure("curves", "cvar10_loss"),
                       ("cvar10_loss", "avg_accuracy", "worst_accuracy")),
        "fig6": recipe(main, Figure("bars", "bottom10_accuracy"), experiment="fig6"),
        "fig7": fig7,
        # MUSMET's Figs. 8-9 and Tables II-III on the MUSMET-sized task: the bits and trigger
        # columns beside the paper's (its claims there are MUSMET's, not judged on a proxy)
        "fig8": on_musmet(replace(fig2, arms=main, figure=Figure(
            "curves", "accuracy", "bits_per_client", marks_from="table2"))),
        "fig9": on_musmet(replace(fig3, arms=every_theta)),
        "table2": on_musmet(recipe(main, Figure("bars", "bits_per_client"), k0=trigger_finding)),
        "table3": on_musmet(recipe((main[0], *ablations), Figure("bars", "bits_per_client"),
                                   k0=trigger_finding, k1=bits_finding)),
    }


def of(results: Results, method: str) -> list[Any]:
    return [ms for a, ms in results.items() if a.method == method and not a.at.get("graph")
            and a.at.get("theta0", THETA0) == THETA0]


def trigger_finding(results: Results) -> str:
    """How often the trigger fired, and what triggering saved against chi = 1."""
    parts = []
    for a, ms in results.items():
        if a.method == "DMFL-SQ":
            rates = [m.scalars["trigger_rate"] for m in ms if "trigger_rate" in m.scalars]
            if rates:
                mean, half = mean_ci(rates)
                parts.append(f"{a.label()}: the trigger fired in {mean:.2%} of client-rounds"
                             + ("" if half != half else f" (+- {half:.2%})"))
    full, always = of(results, "DMFL-SQ"), of(results, "DMFL-SQ no event-triggering")
    if full and always:
        ratio = mean_ci([m.scalars["bits_per_client"] for m in full[0]])[0] / \
            mean_ci([m.scalars["bits_per_client"] for m in always[0]])[0]
        parts.append(f"DMFL-SQ's bits per client are {ratio:.1%} of the no-event-triggering "
                     "variant's (eq. 18 with chi = 1); the paper's Table III has 0.6 against "
                     "4.0 Mbit (15%)")
    return "; ".join(parts) or "no DMFL-SQ run here"


def bits_finding(results: Results) -> str:
    """Table III's bits against eq. 18 with chi = 1 and the alpha = 0 run (inconsistency 2)."""
    return f"{eq18_count(results)}; {consensus_finding(results)}"


def eq18_count(results: Results) -> str:
    """Eq. 18 plus eq. 20's consensus for a client on the ring sending every round (chi = 1)
    for T = 500, at the runs' own P: what 'no event-triggering' must cost."""
    plans = [json.loads((m.run_dir / "plan.json").read_text())
             for ms in results.values() for m in ms[:1] if m.run_dir is not None]
    if not plans:
        return "no run here"
    plan = plans[0]
    size = classifier_parameters({**plan["data"], "model": plan["model"]})
    if size is None:
        return "the model's P is not known here"
    k = math.ceil(0.01 * size)
    message = sum(message_bits(MessageAccounting(), k, size, value_bits=8, sparse=True,
                               quantized=True).values())
    degree, consensus, horizon = 2, 74 * 10, 500  # the ring: K_Psi |E| / n = 10
    total = horizon * (degree * message + consensus)
    return (f"eq. 18 at P = {size:,} (k = {k:,}): a Top_1% Q8 message costs {message:,} bits "
            f"per link; sending every round on the ring costs {total / 1e6:.2f} Mbit per "
            f"client over T = 500 ({horizon * consensus / 1e6:.2f} of it the consensus), "
            "against the 4.0 Mbit of Table III's no-event-triggering row")


def consensus_finding(results: Results) -> str:
    """The alpha = 0 run's bits per client per round, extrapolated to the paper's T = 500."""
    runs = of(results, "DMFL-SQ alpha=0")
    if not runs:
        return "no alpha = 0 run here"
    per_round = [m.scalars["bits_per_client"] / max(m.series["round"]["bits_per_client"])
                 for m in runs[0] if m.series.get("round", {}).get("bits_per_client")]
    mean, _ = mean_ci(per_round)
    return (f"the alpha = 0 variant costs {mean:,.0f} bits per client per round (eq. 20, the "
            f"fairness consensus included), {mean * 500 / 1e6:.2f} Mbit over T = 500, against "
            "the 0.2 Mbit of Table III")
