"""`python -m bench.reproduce`: every experiment of the three papers at every budget has its arms,
a claim is judged only on the experiment it belongs to and only on the arms its method and point
name, and (slow) every experiment runs at the quick budget and writes its outputs."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import click
import pytest

from bench.reproduce.__main__ import DATA_ROOT, main, parse
from bench.reproduce.arms import Arm, drop_checkpoints
from bench.reproduce.backend import for_backend
from bench.reproduce.docs_page import command
from bench.reproduce.experiment import judge_claim, parse_method, parse_point
from bench.reproduce.judge import Verdict
from bench.reproduce.measures import Measured
from bench.reproduce.paperdata import Check, Claim, load_paper
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
        methods = {a.method for a in recipes[experiment.id].arms}
        for claim in experiment.claims:
            if claim.check is None:
                continue
            for spec in (claim.check.method, *claim.check.than):
                name, _ = parse_method(spec)
                assert name == "*" or name in methods, (experiment.id, claim.id, spec)


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
    for experiment in load_paper(paper).experiments:
        assert f"(`{experiment.id}`)" in text, experiment.id
        assert command(paper, experiment.id) in text or experiment.why_not in text, \
            experiment.id


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


def test_accuracy_at_equal_bits_reads_each_curve_at_the_fewest_bits_any_run_ended_at() -> None:
    claim = Claim(id="c", text="t", where="w", check=Check(
        kind="higher", metric="accuracy_at_equal_bits", method="A", than=("B",)))
    cheap = [Measured({"bits_per_client": 100.0}, {"round": {
        "accuracy": {1: 0.5 + d, 2: 0.6 + d}, "bits_per_client": {1: 50.0, 2: 100.0}}})
        for d in (0, .01, .02)]
    # B is more accurate at its end, but at 100 bits it had made one evaluation, at 0.3
    dear = [Measured({"bits_per_client": 1000.0}, {"round": {
        "accuracy": {1: 0.3 + d, 2: 0.9}, "bits_per_client": {1: 90.0, 2: 1000.0}}})
        for d in (0, .01, .02)]
    runs = {Arm("A", "a", "g", {}): cheap, Arm("B", "b", "g", {}): dear}
    assert judge_claim(claim, runs).verdict == Verdict.HOLDS


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
    (["dmfl-sq", "fig8"], "dmfl-sq fig8 .Fig. 8. cannot be reproduced here: MUSMET"),
    (["dsc", "--budget", "huge"], "invalid choice: 'huge'"),
    (["dsc", "--backend", "kubernetes"], "--backend: invalid choice: 'kubernetes' .choose from "
                                         "'local', 'slurm'.$"),
    (["dsc", "--time", "02:00:00"], "^python -m bench.reproduce: --time: only with --backend "
                                    "slurm$"),
    (["dsc", "--backend", "slurm", "--time", "2h"], "--time: expected minutes, HH:MM:SS or "
                                                     "D-HH:MM:SS, got '2h'$"),
    (["dsc", "--backend", "slurm", "--jobs", "0"], "--jobs: must be at least 1, got 0$"),
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
    """One table of options (launcher/config/slurm_options.py) for both command lines, whose
    defaults are the Resources model's: given nothing, a job asks for what `dfl-launch slurm`
    asks for."""
    from launcher.cli import cli
    from launcher.config.slurm_job import Resources
    from launcher.config.slurm_options import RESOURCE_OPTIONS, resources_of

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
        for arm in record["arms"]:
            for column in recipes[experiment_id].columns:
                if column in arm["scalars"]:
                    assert len(arm["scalars"][column]["values"]) == 1  # one seed at quick
        assert any(arm["scalars"] for arm in record["arms"])
        assert len(record["paper_numbers"]) == len(experiment.numbers)
    if sys.platform == "linux":  # every run directory is a finished run, kept for a resume
        summaries = list((out / "runs").glob("*/*/defaults/seed-0/summary.json"))
        assert summaries and all(json.loads(s.read_text())["status"] == "ok"
                                 for s in summaries)
        assert not list((out / "runs").glob("*/*/defaults/seed-0/checkpoints"))


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
