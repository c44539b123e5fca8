"""What a paper says about its experiments, as data: every figure and table of its experimental
section, the setting it states for each, the numbers its text and tables give, and each claim it
makes for that experiment, in a form a measurement can be judged against.

Why data: the paper's numbers are printed beside ours, and a claim is judged only against the
experiment the paper made it for (a claim belongs to one experiment, by construction of the
file). The files, bench/reproduce/papers/<paper>.yaml, are the project's restatement of the
papers in its own words, with the place in the paper each number and claim comes from; nothing
at run time reads the papers themselves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, model_validator

from dfl_config.section import Section

PAPERS = Path(__file__).resolve().parent / "papers"


class PaperNumber(Section):
    """One number the paper states (in a table, or in its text about a figure)."""

    method: str
    """The method as the paper names it (DMFL-SQ, D-PSGD, FedAvg, ...)."""
    metric: str
    """What it measures, in the paper's words (e.g. "worst-client accuracy")."""
    value: float
    unit: str = ""
    """"%", "MB", "bits", "s" or "" for a plain number."""
    condition: str = ""
    """The setting the number belongs to when a table has several (e.g. "J = 5", "N = 20")."""
    where: str
    """Where the paper states it: "Table II", "Sec. VI-B, text on Fig. 2"."""
    ours: str = ""
    """The key of our measurement it is printed beside (a Check metric), when there is one;
    the method may carry a point, "Similarity (J=5)"."""


class Check(Section):
    """The measurable form of a claim: `method`'s `metric` is higher (or lower) than each of
    `than`'s, judged on means over seeds with 95% intervals; or, for `trend`, the metric
    rises, falls, dips in the middle (u-shaped) or peaks in the middle along the experiment's
    swept values (`along`)."""

    kind: Literal["higher", "lower", "trend"]
    metric: str
    """A key of our measurement (a summary.json key such as avg_accuracy, worst_accuracy,
    bottom10_accuracy, jain_index, cvar10_loss, formula_bits, or a documented derived one)."""
    method: str
    than: tuple[str, ...] = ()
    along: str = ""
    """For `trend`: the swept setting (e.g. "theta0", "J")."""
    direction: Literal["rises", "falls", "u-shaped", "peaks", ""] = ""
    condition: str = ""
    """The setting of the experiment the claim is made at, when it is not all of it (e.g.
    "tau_a = 5", "J = 5"): only the runs at that setting are compared."""

    @model_validator(mode="after")
    def _shape(self) -> Check:
        if self.kind == "trend":
            if not (self.along and self.direction):
                raise ValueError("a trend names what it runs `along` and its `direction`")
        elif not self.than:
            raise ValueError("higher/lower compares `method` with the methods in `than`")
        return self


class Claim(Section):
    """One claim the paper makes for one experiment."""

    id: str
    text: str
    """The claim in our words, close to the paper's."""
    where: str
    """Where the paper makes it."""
    check: Check | None = None
    """None when no measurement here can decide it (then the report says why)."""
    why_unchecked: str = ""

    @model_validator(mode="after")
    def _decidable(self) -> Claim:
        if self.check is None and not self.why_unchecked:
            raise ValueError("a claim without a check says why (`why_unchecked`)")
        return self


class Inconsistency(Section):
    """Where the paper contradicts itself, and what measurement shows it."""

    text: str
    where: str
    shown_by: str
    """The measurement that proves it (what the report prints)."""


class Experiment(Section):
    """One figure or table of the experimental section."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    """The EXPERIMENT argument of `python -m bench.reproduce PAPER EXPERIMENT` (fig2, table3)."""
    label: str
    """As the paper labels it: "Fig. 2", "Table III"."""
    shows: str
    """What it shows, one sentence."""
    where: str
    """Its section."""
    dataset: str
    """The paper's dataset for it (CIFAR-10, MUSMET, NYU-v2, ...)."""
    setting: dict[str, Any] = Field(default_factory=dict)
    """The setting the paper states for it: clients, topology, rounds/epochs, seeds, the
    hyper-parameters; keys in the paper's terms, values as stated ("not stated" where it is
    silent)."""
    reproducible: bool
    why_not: str = ""
    """One line, when it cannot be reproduced here (e.g. MUSMET is not obtainable)."""
    numbers: tuple[PaperNumber, ...] = ()
    claims: tuple[Claim, ...] = ()

    @model_validator(mode="after")
    def _reason(self) -> Experiment:
        if not self.reproducible and not self.why_not:
            raise ValueError(f"{self.id}: an experiment that cannot be reproduced says why")
        return self


class Paper(Section):
    id: Literal["dmfl-sq", "ssd-fl", "dsc", "clippedgossip"]
    """A paper file's name; one without a recipe (bench/reproduce/recipes) is data only, not
    yet runnable by `python -m bench.reproduce`."""
    title: str
    budget: dict[str, Any]
    """The paper's own training budget, as it states it (rounds, epochs, seeds, N)."""
    experiments: tuple[Experiment, ...]
    inconsistencies: tuple[Inconsistency, ...] = ()
    sources: str = ""
    """Where the file's data comes from when not simply the paper's text (ClippedGossip's:
    the authors' released code and logs), markdown for the top of the docs page."""

    @model_validator(mode="after")
    def _unique(self) -> Paper:
        ids = [e.id for e in self.experiments]
        claims = [c.id for e in self.experiments for c in e.claims]
        for name, seen in (("experiment", ids), ("claim", claims)):
            if len(seen) != len(set(seen)):
                raise ValueError(f"duplicate {name} ids: {sorted(seen)}")
        return self

    def experiment(self, experiment_id: str) -> Experiment:
        for experiment in self.experiments:
            if experiment.id == experiment_id:
                return experiment
        raise KeyError(experiment_id)


def load_paper(paper: str) -> Paper:
    """bench/reproduce/papers/<paper>.yaml, validated."""
    path = PAPERS / f"{paper}.yaml"
    return Paper.model_validate(yaml.safe_load(path.read_text()))
