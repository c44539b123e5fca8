"""CLI protocol names -> classes: a fixed table, never an import chosen by data."""

from __future__ import annotations

from protocols.base import Protocol
from protocols.chocosgd import ChocoSGD
from protocols.dmflsq import DMFLSQ
from protocols.dpsgd import DPSGD
from protocols.dsc import DSC
from protocols.dsc_baselines import DSCFedAMP, DSCFedAvg, DSCMax, DSCNoAgg
from protocols.dsgt import DSGT
from protocols.qffl import QFFL
from protocols.ssdfl import SSDFL
from protocols.ssdfl_baselines import CSTC, PDFL, SDFL, STC

PROTOCOLS: dict[str, type[Protocol]] = {
    "d-psgd": DPSGD,
    "dmfl-sq": DMFLSQ,
    "choco-sgd": ChocoSGD,
    "dsgt": DSGT,
    "qffl": QFFL,
    "ssd-fl": SSDFL,
    "dsc": DSC,
    "dsc-noagg": DSCNoAgg,
    "dsc-fedavg": DSCFedAvg,
    "dsc-max": DSCMax,
    "dsc-fedamp": DSCFedAMP,
    "sdfl": SDFL,
    "pdfl": PDFL,
    "stc": STC,
    "cstc": CSTC,
}


def protocol_class(name: str) -> type[Protocol]:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise KeyError(f"unknown protocol {name!r} (known: {', '.join(sorted(PROTOCOLS))})") \
            from None
