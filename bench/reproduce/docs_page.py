"""The manual's page for one paper's reproduction (docs/reproduce/PAPER.md), made from its data
file and its recipes, with the measured results of a budget's output directory when given:

    python -m bench.reproduce.docs_page PAPER [--results runs/reproduce/PAPER/medium]

Every figure and table of the paper's experimental section is listed with its command, or with
the one-line reason it cannot be reproduced here; so the page cannot fall behind the data file
(tests/test_reproduce.py checks it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from tempfile import TemporaryDirectory

from bench.reproduce.paperdata import load_paper
from bench.reproduce.recipes import RECIPES

NAMES = {"dmfl-sq": "DMFL-SQ", "ssd-fl": "SSD-FL", "dsc": "DSC"}


def command(paper: str, experiment: str) -> str:
    return f"python -m bench.reproduce {paper} {experiment} --budget medium"


def render(paper_id: str, results: Path | None = None) -> str:
    paper = load_paper(paper_id)
    module = RECIPES[paper_id]
    with TemporaryDirectory() as tmp:
        recipes = {b: module.recipes(b, Path(tmp), None) for b in ("quick", "medium", "paper")}
    name = NAMES[paper_id]
    lines = [
        f"# Reproducing {name}", "",
        f"*{paper.title}*: every figure and table of its experimental section, one command "
        "away. What the paper says about each experiment (its setting, its numbers, its "
        f"claims) is data, `bench/reproduce/papers/{paper_id}.yaml`; the runs of each "
        f"experiment are its recipe, `{module.__name__.replace('.', '/')}.py`.", "",
        f"    python -m bench.reproduce {paper_id} [EXPERIMENT ...] "
        "[--budget quick|medium|paper] [--out DIR]", "",
        "Every experiment writes `OUT/<experiment>.json` (every number), `.md` (our table, the "
        "paper's numbers beside ours, each claim the paper makes for that experiment judged "
        "*holds*, *does not hold* or *not resolved at this budget* on means over seeds with "
        "95 % t-intervals, and, where the paper contradicts itself, the measurement that shows "
        "it) and `.png`. Runs are shared between experiments and kept: the same command again "
        "skips what is finished and resumes what was interrupted "
        "([benchmarks](../benchmarks.md#paper-reproductions) says how claims are judged).", "",
        "| budget | what it runs |", "|---|---|",
    ]
    for budget, text in (("quick", "a smoke run of every experiment (CI's slow suite)"),
                         ("medium", "at most 30 minutes per experiment on 2 cores"),
                         ("paper", "the paper's own rounds, seeds and N; the estimated time "
                                   "here is printed before it starts")):
        sample = next(iter(recipes[budget].values()))
        lines.append(f"| `{budget}` | {text}; seeds {list(sample.seeds)}; "
                     f"{sample.notes[0] if sample.notes else ''} |")
    lines += ["", "## The experiments", "", "| | what it shows | here |", "|---|---|---|"]
    for e in paper.experiments:
        if e.id in recipes["medium"]:
            proxy = "" if e.reproducible else f" (a proxy: {e.why_not})"
            here = f"`{command(paper_id, e.id)}`{proxy}"
        else:
            here = f"cannot be reproduced here: {e.why_not}"
        lines.append(f"| {e.label} (`{e.id}`) | {e.shows} | {here} |")
    if paper.inconsistencies:
        lines += ["", "## Where the paper contradicts itself", ""]
        lines += [f"{k + 1}. {i.text} *Shown by*: {i.shown_by}." for k, i in
                  enumerate(paper.inconsistencies)]
    lines += ["", "## Results at the medium budget", ""]
    for e in paper.experiments:
        found = results / f"{e.id}.md" if results else None
        if found is not None and found.is_file():
            text = found.read_text().replace("\n## ", "\n### ", 1)
            lines += [text.replace("## ", "### ", 1).rstrip(), ""]
        elif e.id in recipes["medium"]:
            lines += [f"### {e.label}", "", "Not measured at the medium budget yet: "
                      f"`{command(paper_id, e.id)}`.", ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.reproduce.docs_page")
    ap.add_argument("paper", choices=sorted(RECIPES))
    ap.add_argument("--results", type=Path, default=None)
    opts = ap.parse_args(argv)
    sys.stdout.write(render(opts.paper, opts.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
