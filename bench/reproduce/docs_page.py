"""The manual's page for one paper's reproduction (docs/reproduce/PAPER.md), made from its data
file, its recipes and the results committed beside it:

    python -m bench.reproduce.docs_page PAPER [--publish BUDGET=OUT ...] [--write]

`--publish medium=runs/reproduce/PAPER/medium` copies a budget's outputs (each experiment's JSON,
every number of it, and its figure drawn again from the JSON) into
docs/reproduce/results/PAPER/BUDGET/, where the page reads them; `--write` writes the page
instead of printing it. Every figure and table of the paper's experimental section is listed
with its command, or with the one-line reason it cannot be reproduced here, so the page cannot
fall behind the data file (tests/test_reproduce.py checks it); every setting that differs from
the paper's is in the experiment's deviation table, made from the arms' resolved configs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from bench.reproduce import deviations, estimate_check
from bench.reproduce.__main__ import estimate_seconds
from bench.reproduce.experiment import Recipe
from bench.reproduce.judge import Verdict
from bench.reproduce.outputs import NOT_CHECKED, draw, paper_points, to_markdown
from bench.reproduce.paperdata import Experiment, Paper, load_paper
from bench.reproduce.recipes import RECIPES

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "reproduce"
RESULTS = DOCS / "results"
NAMES = {"dmfl-sq": "DMFL-SQ", "ssd-fl": "SSD-FL", "dsc": "DSC", "clippedgossip": "ClippedGossip"}
BUDGETS = ("quick", "medium", "paper")
VERDICTS = (*(str(v) for v in Verdict), NOT_CHECKED)


def command(paper: str, experiment: str, budget: str = "medium") -> str:
    return f"python -m bench.reproduce {paper} {experiment} --budget {budget}"


def results_of(paper: str, budget: str) -> dict[str, dict[str, Any]]:
    """The committed records of a budget, by experiment (estimate checks, in their own
    folder, are not experiments)."""
    folder = RESULTS / paper / budget
    return {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))}


def publish(paper_id: str, budget: str, out: Path) -> list[str]:
    """Copy a budget's records into the docs and draw their figures again there."""
    paper = load_paper(paper_id)
    folder = RESULTS / paper_id / budget
    folder.mkdir(parents=True, exist_ok=True)
    done = []
    for source in sorted(out.glob("*.json")):
        record = json.loads(source.read_text())
        if record.get("paper") != paper_id or record.get("budget") != budget:
            continue
        (folder / source.name).write_text(json.dumps(record, indent=1) + "\n")
        marks = paper.experiment(record["figure"].get("marks_from") or record["experiment"])
        draw(record, folder / f"{source.stem}.png",
             paper_points(record, [n.model_dump() for n in marks.numbers]))
        done.append(source.stem)
    for source in sorted((out / estimate_check.FOLDER).glob("*.json")):
        checks = folder / estimate_check.FOLDER
        checks.mkdir(exist_ok=True)
        (checks / source.name).write_text(source.read_text())
        done.append(f"{estimate_check.FOLDER}/{source.stem}")
    return done


def estimate_rows(paper_id: str) -> list[str]:
    """What each budget's estimate promised against what a measured run took: the estimate
    checks (one run, cut where a whole one takes hours) and every whole experiment measured."""
    rows = []
    for budget in BUDGETS:
        folder = RESULTS / paper_id / budget
        for path in sorted((folder / estimate_check.FOLDER).glob("*.json")):
            record = json.loads(path.read_text())
            rows.append(f"| `{budget}` | {record['experiment']}: "
                        f"{estimate_check.what_ran(record)} | "
                        f"{record['estimated_seconds'] / 60:.1f} min | "
                        f"{record['measured_seconds'] / 60:.1f} min | "
                        f"{'-' if record['ratio'] is None else format(record['ratio'], '.2f')} | "
                        f"{record['load_average']['before']:.1f} / "
                        f"{record['load_average']['after']:.1f} |")
        for experiment, record in results_of(paper_id, budget).items():
            if record.get("estimated_seconds"):
                rows.append(f"| `{budget}` | {experiment}, every run | "
                            f"{record['estimated_seconds'] / 60:.1f} min | "
                            f"{record['wall_seconds'] / 60:.1f} min | "
                            f"{record['wall_seconds'] / record['estimated_seconds']:.2f} | - |")
    if not rows:
        return []
    return ["", "The estimates above are sums of costs measured on pieces (a round of one "
            "model, an evaluation, start-up; each recipe's `Cost`). Here they are beside runs "
            "that were measured whole: an estimate check (`--check-estimate`, one run of an "
            "experiment at the budget's own model, epochs and N, cut to a few rounds where a "
            "whole run takes hours) and every experiment measured. The estimates are for an "
            "idle machine; the load average says how busy this one was (2 cores).", "",
            "| budget | run | estimated | measured | measured / estimated | load before / "
            "after |", "|---|---|---|---|---|---|", *rows]


def verdict_counts(records: dict[str, dict[str, Any]]) -> Counter[str]:
    return Counter(c["verdict"] for r in records.values() for c in r["claims"])


def render(paper_id: str) -> str:
    paper = load_paper(paper_id)
    module = RECIPES[paper_id]
    with TemporaryDirectory() as tmp:
        recipes = {b: module.recipes(b, Path(tmp), None) for b in BUDGETS}
        tables = {e.id: {b: deviation_rows(recipes[b][e.id]) for b in BUDGETS}
                  for e in paper.experiments if e.id in recipes["medium"]}
    measured = {b: results_of(paper_id, b) for b in ("medium", "paper")}
    name = NAMES[paper_id]
    lines = [
        f"# Reproducing {name}", "",
        f"*{paper.title}*: every figure and table of its experimental section, one command "
        "away. What the paper says about each experiment (its setting, its numbers, its "
        f"claims) is data, `bench/reproduce/papers/{paper_id}.yaml`; the runs of each "
        f"experiment are its recipe, `{module.__name__.replace('.', '/')}.py`.", "",
        f"    python -m bench.reproduce {paper_id} [EXPERIMENT ...] "
        "[--budget quick|medium|paper] [--out DIR] [--backend local|slurm]", "",
        "Every experiment writes `OUT/<experiment>.json` (every number), `.md` and `.png`. "
        "Runs are shared between experiments and kept: the same command again skips what is "
        "finished and resumes what was interrupted "
        "([benchmarks](../benchmarks.md#paper-reproductions)).", "",
        *([paper.sources.strip(), ""] if paper.sources else []),
        *judging(), "",
        "| budget | what it runs | estimated here |", "|---|---|---|",
    ]
    for budget, text in (("quick", "a smoke run of every experiment (CI's slow suite)"),
                         ("medium", "at most 60 minutes per experiment on this machine "
                                    "(2 cores), the proposed method trained"),
                         ("paper", "the paper's own rounds, epochs, seeds and N")):
        hours = estimated_hours(recipes[budget])
        lines.append(f"| `{budget}` | {text} | {hours:.1f} h of runs, one after another |")
    lines += estimate_rows(paper_id)
    lines += ["", "## The experiments", "",
              "| | what it shows | here | medium: wall time (estimated on an idle machine), "
              "verdicts |", "|---|---|---|---|"]
    for e in paper.experiments:
        record = measured["medium"].get(e.id)
        if e.id in recipes["medium"]:
            proxy = "" if e.reproducible else f" (a proxy: {e.why_not})"
            here = f"`{command(paper_id, e.id)}`{proxy}"
            got = "not measured yet" if record is None else (
                f"{record['wall_seconds'] / 60:.0f} min here "
                f"({record.get('estimated_seconds', 0) / 60:.0f} min idle); "
                + summary(verdict_counts({e.id: record})))
        else:
            here, got = f"cannot be reproduced here: {e.why_not}", "-"
        label = f"[{e.label}](#{e.id})" if e.id in recipes["medium"] else e.label
        lines.append(f"| {label} (`{e.id}`) | {e.shows} | {here} | {got} |")
    lines += ["", "## Verdicts at a glance", "", "| budget | " + " | ".join(VERDICTS) + " |",
              "|---" * (len(VERDICTS) + 1) + "|"]
    for budget, records in measured.items():
        if records:
            counts = verdict_counts(records)
            many = "experiment" if len(records) == 1 else "experiments"
            lines.append(f"| {budget} ({len(records)} {many}) | "
                         + " | ".join(str(counts.get(v, 0)) for v in VERDICTS) + " |")
    if paper.inconsistencies:
        lines += ["", "## Where the paper contradicts itself", ""]
        lines += [f"{k + 1}. {i.text} *Shown by*: {i.shown_by}." for k, i in
                  enumerate(paper.inconsistencies)]
    lines += ["", "## Each experiment", ""]
    for e in paper.experiments:
        if e.id not in tables:
            continue
        lines += experiment_section(paper_id, paper, e.id, tables[e.id], measured)
    return "\n".join(lines).rstrip() + "\n"


def judging() -> list[str]:
    return [
        "Each claim the paper makes for an experiment is judged on paired differences over the "
        "seeds every arm shares: *holds* when the 95 % t-interval of the differences lies on "
        "the claimed side of 0, *does not hold* when it lies on the other side, *not "
        "resolved* when it contains 0 (or one seed gives none); a quantity equal on every "
        "seed (bits of a fixed schedule, a deterministic pre-phase) is judged without an "
        "interval, and a tie does not hold. *Not trained*: a model the claim's accuracy is "
        "read from does not beat the majority-class share of its own test split (chance on a "
        "global test set), shown as the *majority class* row under each table, so the claim "
        "is not judged on it. *Not measured*: a metric the claim needs was not computed, a "
        "defect the quick test fails on. *Not checked*: no measurement here can decide the "
        "claim, which says why. A claim judged on a proxy (other data or another model than "
        "the paper's) says so on its own line."]


def estimated_hours(recipes: dict[str, Recipe]) -> float:
    with TemporaryDirectory() as tmp:
        return estimate_seconds(recipes, Path(tmp)) / 3600


def summary(counts: Counter[str]) -> str:
    return ", ".join(f"{n} {v}" for v, n in counts.most_common()) or "no claim"


def deviation_rows(recipe: Recipe) -> list[deviations.Row]:
    return deviations.rows(recipe.arms, recipe.common, recipe.seeds, recipe.stated, recipe.why,
                           recipe.parameters)


def experiment_section(paper_id: str, paper: Paper, experiment_id: str,
                       tables: dict[str, list[deviations.Row]],
                       measured: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    e = paper.experiment(experiment_id)
    lines = [f"### {e.label} {{#{e.id}}}", "", e.shows, ""]
    for budget in ("medium", "paper"):
        if e.id in measured[budget]:
            lines += [f"![{e.label} at the {budget} budget](results/{paper_id}/{budget}/"
                      f"{e.id}.png)", ""]
    lines += ["Settings: the paper's, and what each budget runs (**bold**: differs, with why).",
              "", *deviations.to_markdown(tables), ""]
    for budget in ("medium", "paper"):
        record = measured[budget].get(e.id)
        if record is not None:
            text = to_markdown(record).replace("## ", "#### ", 1)
            lines += [text.rstrip(), ""]
        elif budget == "medium":
            lines += [f"Not measured at the medium budget yet: `{command(paper_id, e.id)}`.",
                      ""]
    if not any(e.id in measured[b] for b in ("medium", "paper")):
        lines += unmeasured(e)
    return lines


def unmeasured(e: Experiment) -> list[str]:
    """An experiment no budget has published yet: the paper's numbers and its claims, so that
    the page says what the runs will be set beside."""
    lines = []
    if e.numbers:
        lines += ["The paper's numbers:", "", "| method | metric | paper | condition | where |",
                  "|---|---|---|---|---|"]
        lines += [f"| {n.method} | {n.metric} | {f'{n.value:g} {n.unit}'.strip()} | "
                  f"{n.condition} | {n.where} |" for n in e.numbers]
        lines.append("")
    if e.claims:
        lines += ["Its claims, to be judged:", ""]
        for c in e.claims:
            lines.append(f"- {c.text} ({c.where})")
            if c.check is None:
                lines.append(f"  - not checked: {c.why_unchecked}")
        lines.append("")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.reproduce.docs_page")
    ap.add_argument("paper", choices=sorted(RECIPES))
    ap.add_argument("--publish", action="append", default=[], metavar="BUDGET=OUT",
                    help="copy a budget's outputs into docs/reproduce/results first")
    ap.add_argument("--write", action="store_true", help="write docs/reproduce/PAPER.md")
    opts = ap.parse_args(argv)
    for item in opts.publish:
        budget, sep, out = item.partition("=")
        if not sep or budget not in BUDGETS or not Path(out).is_dir():
            ap.error(f"--publish {item!r}: expected BUDGET=OUT with BUDGET one of "
                     f"{', '.join(BUDGETS)} and OUT a directory")
        done = publish(opts.paper, budget, Path(out))
        print(f"published {budget}: {', '.join(done) or 'nothing'}", file=sys.stderr)
    page = render(opts.paper)
    if opts.write:
        (DOCS / f"{opts.paper}.md").write_text(page)
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
