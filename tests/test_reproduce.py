"""`python -m bench.reproduce`: every experiment of the three papers at every budget has its arms,
a claim is judged only on the experiment it belongs to and only on the arms its method and point
name, and (slow) every experiment runs at the quick budget and writes its outputs."""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import replace
from pathlib import Path

import click
import pytest

from bench.reproduce import deviations, docs_page, estimate_check
from bench.reproduce.__main__ import DATA_ROOT, main, parse
from bench.reproduce.arms import Arm, drop_checkpoints
from bench.reproduce.backend import for_backend
from bench.reproduce.docs_page import command, render
from bench.reproduce.experiment import curve_at, judge_claim, parse_method, parse_point
from bench.reproduce.judge import Verdict
from bench.reproduce.measures import Measured, measure, portfolio_deltas
from bench.reproduce.outputs import bar_rows
from bench.reproduce.paperdata import Check, Claim, load_paper
from bench.reproduce.provenance import checkout_commit
from bench.reproduce.recipes import RECIPES

PAPERS = sorted(RECIPES)


def recipes_of(paper: str, budget: str, out: Path) -> dict:
    return RECIPES[paper].recipes(budget, out, None)


@pytest.mark.parametrize("paper", PAPERS)
@pytest.mark.parametrize("budget", ["quick", "medium", "paper"])
def test_every_reproducible_experiment_has_arms_for_every_method_its_claims_name(
        paper: str, budget: str, tmp_path: Path) -> None:
    data = load_paper(paper)
    recipes = recipes_of(paper, budget, tmp_path)
    assert {e.id for e in data.experiments if e.reproducible} <= set(recipes)
    assert set(recipes) <= {e.id for e in data.experiments}
    for experiment in data.experiments:
        if experiment.id not in recipes:
            continue
        recipe = recipes[experiment.id]
        methods = {a.method for a in recipe.arms}
        # only medium cuts methods (to keep its hour with the proposed method trained), and
        # never the one a claim is about
        assert not recipe.cut or budget == "medium", experiment.id
        for claim in experiment.claims:
            if claim.check is None:
                continue
            assert parse_method(claim.check.method)[0] not in recipe.cut, claim.id
            for spec in (claim.check.method, *claim.check.than):
                name, _ = parse_method(spec)
                assert name == "*" or name in methods or name in recipe.cut, \
                    (experiment.id, claim.id, spec)


def test_medium_and_paper_budgets_sweep_what_the_claims_run_along(tmp_path: Path) -> None:
    """A trend needs at least three points of its axis below the paper budget too (a peak or
    a U has an interior point), or, along a series, runs that record it."""
    for paper in PAPERS:
        data = load_paper(paper)
        recipes = recipes_of(paper, "medium", tmp_path / paper)
        for experiment in data.experiments:
            for claim in experiment.claims:
                check = claim.check
                if check is None or check.kind != "trend" or experiment.id not in recipes:
                    continue
                arms = recipes[experiment.id].arms
                values = {a.at[check.along] for a in arms if check.along in a.at}
                assert len(values) >= 2 or check.along in ("round", "S"), claim.id
                if check.direction in ("u-shaped", "peaks") and check.along not in ("S",):
                    assert len(values) >= 3, claim.id


@pytest.mark.parametrize("paper", PAPERS)
def test_the_manual_lists_every_experiment_with_its_command_or_why_not(paper: str) -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "reproduce" / f"{paper}.md")
    text = page.read_text()
    # made, not written: the recipes, the data file and the committed results give it
    assert text == render(paper), f"python -m bench.reproduce.docs_page {paper} --write"
    for experiment in load_paper(paper).experiments:
        assert f"(`{experiment.id}`)" in text, experiment.id
        assert command(paper, experiment.id) in text or experiment.why_not in text, \
            experiment.id


def test_a_published_estimate_check_is_on_the_page_beside_its_estimate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(docs_page, "RESULTS", tmp_path / "results")
    out = tmp_path / "out"
    (out / "estimate-check").mkdir(parents=True)
    record = {"paper": "dsc", "experiment": "table2", "budget": "paper", "method": "FedAvg",
              "protocol": "dsc-fedavg", "seed": 0, "rounds": 3, "cut": True,
              "estimated_seconds": 600.0, "measured_seconds": 900.0, "ratio": 1.5,
              "load_average": {"before": 2.5, "after": 3.0}, "cores": 2, "commit": "x",
              "run": "r"}
    (out / "estimate-check" / "table2.json").write_text(json.dumps(record))
    assert docs_page.publish("dsc", "paper", out) == ["estimate-check/table2"]
    assert docs_page.results_of("dsc", "paper") == {}  # a check is not an experiment's record
    assert "| `paper` | table2: FedAvg, seed 0, cut to 3 rounds | 10.0 min | 15.0 min | 1.50 " \
           "| 2.5 / 3.0 |" in render("dsc")
    one_round = {**record, "rounds": 1}
    assert estimate_check.what_ran(one_round) == "FedAvg, seed 0, cut to 1 round"
    assert estimate_check.what_ran({**record, "cut": False}) == "FedAvg, seed 0"


def measured(values: dict[str, float], **series: dict[float, float]) -> Measured:
    return Measured(scalars=values, series={"round": {k: v for k, v in series.items()}})


def test_a_comparison_is_made_point_by_point_and_named_points_select_arms() -> None:
    claim = Claim(id="c", text="t", where="w", check=Check(
        kind="higher", metric="delta_all", method="Sim (J=5)", than=("Avg (J=5)", "None")))
    arms = {
        Arm("Sim", "dsc", "rgg10", {"J": 5}): [measured({"delta_all": v}) for v in (5, 5.1, 5.2)],
        Arm("Sim", "dsc", "rgg10", {"J": 1}): [measured({"delta_all": v}) for v in (0, 0.1, 0)],
        Arm("Avg", "dsc-fedavg", "rgg10", {"J": 5}): [measured({"delta_all": v})
                                                    for v in (1, 1.1, 1.2)],
        Arm("Avg", "dsc-fedavg", "rgg10", {"J": 1}): [measured({"delta_all": v})
                                                    for v in (9, 9.1, 9.2)],
        Arm("None", "dsc-noagg", "rgg10", {}): [measured({"delta_all": v}) for v in (0, 0, 0.1)],
    }
    judged = judge_claim(claim, arms)
    assert judged.verdict == Verdict.HOLDS, judged.details
    # the J = 1 arm of FedAvg (far above) never enters the J = 5 comparison
    assert len(judged.details) == 1 and "J=1" not in judged.details[0]


def test_a_condition_keeps_the_claim_on_its_setting_and_fails_where_it_fails() -> None:
    check = Check(kind="higher", metric="avg_accuracy", method="SSD-FL", than=("STC",),
                  condition="tau_a = 5")
    claim = Claim(id="c", text="t", where="w", check=check)
    runs = {}
    for tau, ours, theirs in ((1, 0.1, 0.9), (5, 0.8, 0.2)):
        runs[Arm("SSD-FL", "ssd-fl", "g", {"tau_a": tau})] = [
            measured({"avg_accuracy": ours + d}) for d in (0, 0.01, 0.02)]
        runs[Arm("STC", "stc", "g", {"tau_a": tau})] = [
            measured({"avg_accuracy": theirs + d}) for d in (0, 0.01, 0.02)]
    assert judge_claim(claim, runs).verdict == Verdict.HOLDS
    unconditioned = Claim(id="c", text="t", where="w", check=check.model_copy(
        update={"condition": ""}))
    assert judge_claim(unconditioned, runs).verdict == Verdict.FAILS


def test_trends_run_along_the_arms_axis_or_a_series_of_each_run() -> None:
    falls = Claim(id="c", text="t", where="w", check=Check(
        kind="trend", metric="bits_per_client", method="D", along="theta0", direction="falls"))
    runs = {Arm("D", "dmfl-sq", "ring20", {"theta0": t}): [
        measured({"bits_per_client": 100 / t + d}) for d in (0, 1, 2)] for t in (0.1, 0.5, 2)}
    assert judge_claim(falls, runs).verdict == Verdict.HOLDS
    over_rounds = Claim(id="c", text="t", where="w", check=Check(
        kind="trend", metric="cvar10_loss", method="D", along="round", direction="falls"))
    arm = Arm("D", "dmfl-sq", "ring20", {})
    rising = {arm: [measured({}, cvar10_loss={10: 1.0 + d, 20: 2.0 + d}) for d in (0, .1, .2)]}
    assert judge_claim(over_rounds, rising).verdict == Verdict.FAILS
    every = Claim(id="c", text="t", where="w", check=Check(
        kind="trend", metric="bits_per_client", method="*", along="theta0", direction="falls"))
    assert judge_claim(every, runs).verdict == Verdict.HOLDS


def test_accuracy_at_equal_bits_interpolates_each_curve_at_the_fewest_bits_any_ended_at(
) -> None:
    claim = Claim(id="c", text="t", where="w", check=Check(
        kind="higher", metric="accuracy_at_equal_bits", method="A", than=("B",)))
    cheap = [Measured({"bits_per_client": 100.0}, {"round": {
        "accuracy": {1: 0.5 + d, 2: 0.6 + d}, "bits_per_client": {1: 50.0, 2: 100.0}}})
        for d in (0, .01, .02)]
    # B is more accurate at its end; at 100 bits its curve is a ninety-first of the way from
    # 0.3 (at 90 bits) to 0.9 (at 1000)
    dear = [Measured({"bits_per_client": 1000.0}, {"round": {
        "accuracy": {1: 0.3 + d, 2: 0.9}, "bits_per_client": {1: 90.0, 2: 1000.0}}})
        for d in (0, .01, .02)]
    runs = {Arm("A", "a", "g", {}): cheap, Arm("B", "b", "g", {}): dear}
    judged = judge_claim(claim, runs)
    assert judged.verdict == Verdict.HOLDS, judged.details
    assert "at 100 bits per client" in judged.details[0]
    assert curve_at([90.0, 1000.0], [0.3, 0.9], 100.0) == pytest.approx(0.3 + 0.6 / 91)
    # without a common range (B's first evaluation after A's end) it says so
    late = [Measured({}, {"round": {"accuracy": {1: 0.9}, "bits_per_client": {1: 500.0}}})
            for _ in range(3)]
    apart = judge_claim(claim, {Arm("A", "a", "g", {}): cheap, Arm("B", "b", "g", {}): late})
    assert apart.verdict == Verdict.UNRESOLVED and "do not overlap" in apart.details[0]


def planted_run(run_dir: Path, per_round_bits: float, accuracies: dict[int, float],
                rounds: int) -> Path:
    """A finished run's files as the launcher writes them: 2 clients, eval_at_start."""
    run_dir.mkdir(parents=True)
    rows = [{"round": r, "node": n, "accuracy": a, "loss": 1.0}
            for r, a in accuracies.items() for n in (0, 1)]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run_dir / "summary.json").write_text(json.dumps({
        "nodes": [{"id": 0}, {"id": 1}], "bits_per_client": per_round_bits * rounds / 2,
        "formula": {"per_round": {str(t): {"0": per_round_bits / 2, "1": per_round_bits / 2}
                                  for t in range(rounds)}}}))
    (run_dir / "plan.json").write_text(json.dumps({
        "nodes": [{"id": 0}, {"id": 1}], "aggregator": None,
        "data": {"dataset": "none", "data_root": None, "partition": "iid", "eval_split": "global",
                 "seed": 0, "eval_size": 2, "num_classes": 2, "shape": [1]}}))
    return run_dir


def test_a_dense_baseline_is_read_at_a_compressed_methods_bits_from_its_untrained_start(
        tmp_path: Path) -> None:
    """DMFL-SQ Fig. 2 (fig2-curve-above-dense): DMFL-SQ spends 7.5e7 bits per client in all,
    D-PSGD 1.4e8 per round. With round 0 evaluated (eval_at_start, which every DMFL-SQ
    recipe asks for) D-PSGD's curve starts at 0 bits and is read between its round 0 and
    its first evaluation; on 7984ed7 round 0 was charged the run's total bits, so no D-PSGD
    point fell under the budget and the claim could never be judged."""
    claim = Claim(id="c", text="t", where="w", check=Check(
        kind="higher", metric="accuracy_at_equal_bits", method="DMFL-SQ", than=("D-PSGD",)))
    runs = {Arm("DMFL-SQ", "dmfl-sq", "g", {}): [], Arm("D-PSGD", "d-psgd", "g", {}): []}
    for seed in (0, 1, 2):
        ours = planted_run(tmp_path / f"dmfl-{seed}", 1.5e5 * 2, {0: 0.1, 10: 0.3 + seed / 100,
                                                                   500: 0.5 + seed / 100}, 500)
        dense = planted_run(tmp_path / f"dpsgd-{seed}", 1.4e8 * 2, {0: 0.1, 10: 0.45,
                                                                    20: 0.6}, 20)
        for arm, run in zip(runs, (ours, dense), strict=True):
            runs[arm].append(measure(run, seed))
    assert runs[next(iter(runs))][0].series["round"]["bits_per_client"][0] == 0.0
    judged = judge_claim(claim, runs)
    assert judged.verdict == Verdict.HOLDS, judged.details
    for budget in ("quick", "medium", "paper"):
        assert RECIPES["dmfl-sq"].recipes(budget, tmp_path, None)["fig2"].common[
            "eval_at_start"] is True


def test_a_negated_condition_keeps_the_compared_arms_on_the_same_graph() -> None:
    """SSD-FL Figs. 6, 7, 12 ("graph != Comp"): each SSD-FL arm is compared with the baseline
    on its own graph. On 7984ed7 the condition freed the graph axis, and the PrefA arm was
    compared with the first baseline that matched, on RNG: here that made a claim that fails
    on PrefA hold."""
    claim = Claim(id="c", text="t", where="w", check=Check(
        kind="higher", metric="avg_accuracy", method="SSD-FL", than=("sDFL",),
        condition="graph != Comp"))
    values = (("sDFL", "RNG", .40), ("SSD-FL", "RNG", .60), ("sDFL", "PrefA", .80),
              ("SSD-FL", "PrefA", .70), ("sDFL", "Comp", .10), ("SSD-FL", "Comp", .20))
    runs = {Arm(m, "p", "t", {"graph": g}): [measured({"avg_accuracy": v + d})
                                             for d in (0, .01, .02)] for m, g, v in values}
    judged = judge_claim(claim, runs)
    assert judged.verdict == Verdict.FAILS, judged.details
    assert len(judged.details) == 2
    assert all(len(set(re.findall(r"graph=(\w+)", d))) == 1 for d in judged.details), \
        judged.details


def test_dsc_group_deltas_are_read_from_each_clients_per_task_deltas() -> None:
    """DSC Fig. 6 (f6-u-*): the summary keeps Delta_{i,t} per task for each client; a group's
    Delta is the mean of its clients' Delta_i. On 7984ed7 a per-task mapping was not a number,
    so no delta_group was ever measured and the four claims could never be judged."""
    summary = {"delta_clients": {"0": {"seg": 2.0, "dep": 4.0}, "1": {"seg": 0.0, "dep": 2.0},
                                 "2": {"seg": 1.0, "sn": 3.0}},
               "task_metrics": {"0": {"dep": {}, "seg": {}}, "1": {"seg": {}, "dep": {}},
                                "2": {"sn": {}, "seg": {}}}}
    assert portfolio_deltas(summary) == {"delta_group:seg+dep": 2.0, "delta_group:seg+sn": 2.0}


def test_an_accuracy_claim_on_models_that_did_not_train_is_not_judged() -> None:
    claim = Claim(id="c", text="t", where="w", check=Check(
        kind="higher", metric="avg_accuracy", method="A", than=("B",)))
    bar = {"majority:avg_accuracy": 0.62}
    runs = {Arm("A", "a", "g", {}): [measured({"avg_accuracy": v, **bar})
                                     for v in (.80, .81, .82)],
            Arm("B", "b", "g", {}): [measured({"avg_accuracy": v, **bar})
                                     for v in (.60, .64, .62)]}
    judged = judge_claim(claim, runs)
    assert judged.verdict == Verdict.NOT_TRAINED
    assert "B's avg_accuracy" in judged.details[0] and "majority-class share" in judged.details[0]
    trained = {arm: [measured({**m.scalars, "avg_accuracy": m.scalars["avg_accuracy"] + .1})
                     for m in ms] for arm, ms in runs.items()}
    assert judge_claim(claim, trained).verdict == Verdict.HOLDS
    # a claim on another metric is judged whatever the accuracy
    bits = Claim(id="c", text="t", where="w", check=Check(
        kind="lower", metric="bits", method="B", than=("A",)))
    for arm, ms in runs.items():
        for i, m in enumerate(ms):
            m.scalars["bits"] = 1.0 if arm.method == "B" else 2.0 + i / 10
    assert judge_claim(bits, runs).verdict == Verdict.HOLDS


def test_a_method_a_budget_cuts_leaves_a_claim_unresolved_unless_another_comparison_fails(
) -> None:
    claim = Claim(id="c", text="t", where="w", check=Check(
        kind="higher", metric="bits", method="A", than=("B", "C")))
    runs = {Arm(m, "p", "g", {}): [measured({"bits": v + d}) for d in (0, .01, .03)]
            for m, v in (("A", 2.0), ("B", 1.0))}
    judged = judge_claim(claim, runs, cut={"C": "an hour's budget"})
    assert judged.verdict == Verdict.UNRESOLVED
    assert any("C: not run at this budget (an hour's budget)" in d for d in judged.details)
    lower = {arm: [measured({"bits": 3.0 - m.scalars["bits"]}) for m in ms]
             for arm, ms in runs.items()}
    assert judge_claim(claim, lower, cut={"C": "x"}).verdict == Verdict.FAILS
    assert judge_claim(claim, runs).verdict == Verdict.NOT_MEASURED  # C not cut: a defect


def test_a_metric_that_was_not_computed_is_not_measured() -> None:
    claim = Claim(id="c", text="t", where="w", check=Check(
        kind="higher", metric="delta_group:seg+dep", method="A", than=("B",)))
    runs = {Arm(m, "p", "g", {}): [measured({"delta_all": 1.0}) for _ in range(3)]
            for m in "AB"}
    judged = judge_claim(claim, runs)
    assert judged.verdict == Verdict.NOT_MEASURED and "was not measured" in judged.details[0]
    nobody = Claim(id="c", text="t", where="w", check=Check(
        kind="higher", metric="delta_all", method="C", than=("B",)))
    assert judge_claim(nobody, runs).verdict == Verdict.NOT_MEASURED


def test_an_arm_evaluated_on_its_own_split_only_shares_the_bar_row_of_the_others() -> None:
    """DMFL-SQ evaluates each client's own split only, the baselines both splits: one
    majority-class row, its global cells from the baselines (two identical-looking rows
    before)."""
    def arm(method: str, bars: dict[str, list[float]]) -> dict:
        return {"method": method, "at": {},
                "scalars": {f"majority:{k}": {"values": v} for k, v in bars.items()}
                | {"chance": {"values": [0.1, 0.1]}}}
    own = {"avg_accuracy": [0.62, 0.64]}
    record = {"arms": [arm("A", own), arm("B", own | {"global_avg_accuracy": [0.13, 0.12]})]}
    rows = bar_rows(record, ("avg_accuracy", "global_avg_accuracy"))
    assert rows == ["| *majority class* (chance 0.1 +- 0) | every arm | 0.63 +- 0.13 | "
                    "0.125 +- 0.064 |"]
    other = {"avg_accuracy": [0.5, 0.5]}
    record["arms"].append(arm("C", other))
    assert len(bar_rows(record, ("avg_accuracy", "global_avg_accuracy"))) == 2


def test_points_and_methods_are_parsed_as_the_data_files_write_them() -> None:
    assert parse_method("Similarity (J=5)") == ("Similarity", {"J": "5"})
    assert parse_method("DMFL-SQ rho=0") == ("DMFL-SQ rho=0", {})
    assert parse_method("L (ResNet-34)") == ("L (ResNet-34)", {})
    assert parse_point("tau_a = 5, level = extreme") == {"tau_a": "5", "level": "extreme"}
    assert parse_point("graph != Comp") == {"graph": "!Comp"}


def test_a_condition_may_exclude_a_setting() -> None:
    claim = Claim(id="c", text="t", where="w", check=Check(
        kind="higher", metric="avg_accuracy", method="A", than=("B",),
        condition="graph != Comp"))
    runs = {Arm(m, "p", "g", {"graph": g}): [measured({"avg_accuracy": v + d})
                                             for d in (0, .01, .02)]
            for m, g, v in (("A", "RNG", .8), ("B", "RNG", .5), ("A", "Comp", .5),
                            ("B", "Comp", .8))}
    judged = judge_claim(claim, runs)
    assert judged.verdict == Verdict.HOLDS and len(judged.details) == 1


@pytest.mark.parametrize(("args", "message"), [
    (["dmfl-sq", "fig99"], "dmfl-sq has no experiment 'fig99'"),
    (["dmfl-sq", "fig10"], "dmfl-sq fig10 .Fig. 10. cannot be reproduced here: MUSMET"),
    (["dsc", "--budget", "huge"], "invalid choice: 'huge'"),
    (["dsc", "--backend", "kubernetes"], "--backend: invalid choice: 'kubernetes' .choose from "
                                         "'local', 'slurm'.$"),
    (["dsc", "--time", "02:00:00"], "^python -m bench.reproduce: --time: only with --backend "
                                    "slurm$"),
    (["dsc", "--backend", "slurm", "--time", "2h"], "--time: expected minutes, HH:MM:SS or "
                                                     "D-HH:MM:SS, got '2h'$"),
    (["dsc", "--backend", "slurm", "--jobs", "0"], "--jobs: must be at least 1, got 0$"),
    (["dsc", "--rounds", "3"], "--rounds K takes a K of at least 1, and only with "
                               "--check-estimate$"),
    (["dsc", "--check-estimate", "--rounds", "0"], "--rounds K takes a K of at least 1"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*args, "--out", str(tmp_path / "o")])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and not out
    (line,) = err.strip().splitlines()
    assert re.search(message, line), err
    assert not (tmp_path / "o").exists()


def test_slurm_without_its_client_commands_here_is_one_line_and_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before anything is written or submitted: a reproduction queues dozens of jobs, and
    follows each with squeue and scancel."""
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(SystemExit) as exc:
        main(["dmfl-sq", "fig4", "--backend", "slurm", "--out", str(tmp_path / "o")])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and not out
    assert err.strip().splitlines() == [
        "python -m bench.reproduce: Slurm's client commands sbatch, squeue, scancel, sinfo: not "
        "found on this host (PATH); submitting runs to Slurm needs them here"]
    assert not (tmp_path / "o").exists()


def test_slurm_takes_dfl_launch_slurms_options_with_their_defaults() -> None:
    """One table of options (launcher/slurm/resource_options.py) for both command lines, whose
    defaults are the Resources model's: given nothing, a job asks for what `dfl-launch slurm`
    asks for."""
    from launcher.cli import cli
    from launcher.slurm.job import Resources
    from launcher.slurm.resource_options import RESOURCE_OPTIONS, resources_of

    slurm = cli.get_command(click.Context(cli), "slurm")
    assert slurm is not None
    launch = {p.opts[0]: p.default for p in slurm.params if isinstance(p, click.Option)}
    ours = parse(["dsc", "--backend", "slurm"])
    for option in RESOURCE_OPTIONS:
        assert launch[option.flag] == option.default, option.flag
        assert getattr(ours, option.dest) is None  # not given: the model's default
    assert resources_of(vars(ours)) == Resources()
    given = parse(["dsc", "--backend", "slurm", "--time", "2-00:00:00", "--slurm-partition",
                   "big", "--cpus-per-task", "4", "--step-per-node"])
    assert resources_of(vars(given)) == Resources(cpus_per_task=4, time="2-00:00:00",
                                                  partition="big", step_per_node=True)


def test_a_quick_recipe_on_slurm_drops_only_the_threads_transport(tmp_path: Path) -> None:
    """A Slurm job's nodes are tasks over zmq; the medium and paper budgets name no transport,
    so their runs are one directory under either backend."""
    quick = recipes_of("dmfl-sq", "quick", tmp_path)["fig4"]
    slurm = for_backend(quick, "slurm")
    assert quick.common["transport"] == "inproc" and "transport" not in slurm.common
    assert {k: v for k, v in quick.common.items() if k != "transport"} == dict(slurm.common)
    assert for_backend(quick, "local") is quick
    paper = recipes_of("dmfl-sq", "paper", tmp_path)["fig4"]
    assert for_backend(paper, "slurm") is paper


def cifar_root() -> Path:
    if not DATA_ROOT.is_dir() and os.environ.get("CI") != "true":
        pytest.skip(f"no CIFAR-10 at {DATA_ROOT}")
    return DATA_ROOT


@pytest.mark.slow
@pytest.mark.parametrize("paper", PAPERS)
def test_every_experiment_runs_at_the_quick_budget_and_writes_its_outputs(
        paper: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / paper
    code = main([paper, "--budget", "quick", "--out", str(out),
                 "--data-root", str(cifar_root())])
    assert code == 0, capsys.readouterr().err[-2000:]
    data = load_paper(paper)
    recipes = recipes_of(paper, "quick", tmp_path / "again")
    for experiment_id in recipes:
        experiment = data.experiment(experiment_id)
        record = json.loads((out / f"{experiment_id}.json").read_text())
        assert (out / f"{experiment_id}.png").stat().st_size > 1000
        assert experiment.label in (out / f"{experiment_id}.md").read_text()
        # the claims judged are this experiment's, every one of them, and only those
        assert [c["id"] for c in record["claims"]] == [c.id for c in experiment.claims]
        verdicts = {str(v) for v in Verdict} | {"not checked"}
        assert {c["verdict"] for c in record["claims"]} <= verdicts
        # a claim whose metric no run computed is a defect of the recipe, at any budget
        assert not [c["id"] for c in record["claims"] if c["verdict"] == "not measured"], \
            [(c["id"], c["details"]) for c in record["claims"] if c["verdict"] == "not measured"]
        for arm in record["arms"]:
            for column in recipes[experiment_id].columns:
                if column in arm["scalars"]:
                    assert len(arm["scalars"][column]["values"]) == 1  # one seed at quick
        assert any(arm["scalars"] for arm in record["arms"])
        assert len(record["paper_numbers"]) == len(experiment.numbers)
        # every run was finished here, by this checkout, and says so
        assert record["run_commits"] == [record["commit"]] == [checkout_commit()]
    if sys.platform == "linux":  # every run directory is a finished run, kept for a resume
        summaries = list((out / "runs").glob("*/*/defaults/seed-0/summary.json"))
        assert summaries and all(json.loads(s.read_text())["status"] == "ok"
                                 for s in summaries)
        assert not list((out / "runs").glob("*/*/defaults/seed-0/checkpoints"))


@pytest.mark.slow
def test_an_estimate_check_runs_one_cut_run_and_sets_its_wall_time_beside_the_estimate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    args = ["dsc", "comm-cost", "--budget", "quick", "--check-estimate", "--rounds", "2",
            "--out", str(out)]
    assert main(args) == 0, capsys.readouterr().err[-2000:]
    record = json.loads((out / "estimate-check" / "comm-cost.json").read_text())
    recipe = recipes_of("dsc", "quick", tmp_path / "again")["comm-cost"]
    arm = recipe.arms[0]
    assert (record["method"], record["seed"], record["rounds"], record["cut"]) == \
        (arm.label(), recipe.seeds[0], 2, True)
    run_dir = out / "estimate-check" / "runs" / record["run"]
    summary = json.loads((run_dir / "summary.json").read_text())
    # the record copies the run's own figures (an identity, not a bound on time)
    copied = {key: summary[key] for key in ("rounds", "wall_seconds")}
    assert copied == {"rounds": 2, "wall_seconds": record["measured_seconds"]}
    cut = replace(arm, settings={**arm.settings, "rounds": 2})
    assert record["estimated_seconds"] == recipe.cost.seconds(
        arm.protocol, cut.variant(recipe.common).settings)
    assert record["ratio"] == record["measured_seconds"] / record["estimated_seconds"]
    assert not list(out.glob("comm-cost.*"))  # a check writes no experiment outputs
    # the same command again reads the finished run instead of running it once more
    stamp = (run_dir / "summary.json").stat().st_mtime_ns
    assert main(args) == 0
    assert (run_dir / "summary.json").stat().st_mtime_ns == stamp
    assert "cut to 2 rounds: estimated" in capsys.readouterr().out


def test_a_finished_run_loses_its_checkpoints_and_an_unfinished_one_keeps_them(
        tmp_path: Path) -> None:
    for name, status in (("ok", "ok"), ("failed", "failed"), ("killed", None)):
        run = tmp_path / name
        (run / "checkpoints" / "node-0").mkdir(parents=True)
        (run / "checkpoints" / "node-0" / "round-2.safetensors").write_bytes(b"x")
        if status is not None:
            (run / "summary.json").write_text(json.dumps({"status": status}))
        drop_checkpoints(run)
    assert [p.name for p in sorted(tmp_path.glob("*/checkpoints"))] == ["checkpoints"] * 2
    assert not (tmp_path / "ok" / "checkpoints").exists()
    assert (tmp_path / "ok" / "summary.json").exists()


@pytest.mark.parametrize("paper", PAPERS)
@pytest.mark.parametrize("budget", ["quick", "medium", "paper"])
def test_every_setting_that_differs_from_the_paper_says_why(paper: str, budget: str,
                                                           tmp_path: Path) -> None:
    """The deviation table is made from the arms' resolved configs: a budget that changes a
    setting the paper states (rounds, lr, model, ...) without a reason fails here."""
    for name, recipe in recipes_of(paper, budget, tmp_path).items():
        rows = deviations.rows(recipe.arms, recipe.common, recipe.seeds, recipe.stated,
                               recipe.why, recipe.parameters)
        assert [r.setting for r in rows] == list(deviations.SETTINGS)
        unexplained = [(r.setting, r.paper, r.used) for r in rows if r.differs and not r.why]
        assert not unexplained, (name, unexplained)
