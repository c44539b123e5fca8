"""CLI protocol names -> classes: a fixed table, never an import chosen by data."""

from __future__ import annotations

from protocols.base import Protocol
from protocols.dmflsq.chocosgd import ChocoSGD
from protocols.dmflsq.dmflsq import DMFLSQ
from protocols.dsc.dsc import DSC
from protocols.dsc.dsc_baselines import DSCFedAMP, DSCFedAvg, DSCMax, DSCNoAgg
from protocols.gossip.dpsgd import DPSGD
from protocols.gossip.dsgt import DSGT
from protocols.gossip.qffl import QFFL
from protocols.ssdfl.ssdfl import SSDFL
from protocols.ssdfl.ssdfl_baselines import CSTC, PDFL, SDFL, STC

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
