"""CLI protocol names -> classes: a fixed table, never an import chosen by data.

The launcher reaches every protocol through this table: what it shows of each (protocols/
describe.py) is read from the classes here. The order is `dfl-report`'s: families in the order
of their first member, and within a family, rows in member order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from protocols.base import Protocol
from protocols.describe import DatasetPreparer, ReportTable, Score
from protocols.dmflsq.chocosgd import ChocoSGD
from protocols.dmflsq.dmflsq import DMFLSQ
from protocols.dsc.dsc import DSC
from protocols.dsc.dsc_baselines import DSCFedAMP, DSCFedAvg, DSCMax, DSCNoAgg
from protocols.gossip.dpsgd import DPSGD
from protocols.gossip.dsgt import DSGT
from protocols.gossip.qffl import QFFL
from protocols.ssdfl.ssdfl import SSDFL
from protocols.ssdfl.ssdfl_baselines import CSTC, PDFL, SDFL, STC

if TYPE_CHECKING:
    import click

PROTOCOLS: dict[str, type[Protocol]] = {
    "dmfl-sq": DMFLSQ,
    "choco-sgd": ChocoSGD,
    "dsgt": DSGT,
    "qffl": QFFL,
    "d-psgd": DPSGD,
    "ssd-fl": SSDFL,
    "sdfl": SDFL,
    "pdfl": PDFL,
    "stc": STC,
    "cstc": CSTC,
    "dsc": DSC,
    "dsc-noagg": DSCNoAgg,
    "dsc-fedavg": DSCFedAvg,
    "dsc-max": DSCMax,
    "dsc-fedamp": DSCFedAMP,
}


def protocol_class(name: str) -> type[Protocol]:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise KeyError(f"unknown protocol {name!r} (known: {', '.join(sorted(PROTOCOLS))})") \
            from None


@dataclass(frozen=True)
class ReportFamily:
    """One table of `dfl-report`: the protocols it compares, in row order."""

    name: str
    table: ReportTable
    score: Score  # the lead protocol's
    members: tuple[str, ...]


def report_families() -> dict[str, ReportFamily]:
    """Every family, in table order; a protocol without a family is in none."""
    members: dict[str, list[str]] = {}
    for name, cls in PROTOCOLS.items():
        if cls.report_family is not None:
            members.setdefault(cls.report_family, []).append(name)
    out = {}
    for family, names in members.items():
        lead = PROTOCOLS[family]
        if lead.report_table is None:
            raise TypeError(f"{lead.__name__} leads the report family {family!r} but declares "
                            "no report_table")
        out[family] = ReportFamily(family, lead.report_table, lead.score, tuple(names))
    return out


def launch_commands() -> list[click.Command]:
    """The `dfl-launch` sub-commands protocols bring, each once (subclasses inherit them)."""
    out: list[click.Command] = []
    for cls in PROTOCOLS.values():
        out += [command for command in cls.launch_commands if command not in out]
    return out


def dataset_preparers() -> dict[str, DatasetPreparer]:
    """`--dataset` name -> preparer, for the datasets protocols bring."""
    return {name: prepare for cls in PROTOCOLS.values() for name, prepare in cls.datasets.items()}


def multitask_baselines() -> list[str]:
    """The hyper-parameters that name a baseline run: where one is, not what runs."""
    return sorted({cls.multitask.baseline for cls in PROTOCOLS.values() if cls.multitask})
