"""The ledger's views add up the recorded messages exactly, per link, per round and per kind."""

from __future__ import annotations

import json

import pytest

from dfl_node.ledgers.traffic import Ledger
from dfl_node.wire.tags import Tag


def filled() -> Ledger:
    ledger = Ledger(0)
    ledger.record_send(1, Tag("data", 0, "g"), 400, 90)
    ledger.record_send(2, Tag("data", 0, "g"), 400, 91)
    ledger.record_send(1, Tag("data", 1, "g"), 400, 92)
    ledger.record_recv(1, Tag("data", 1, "g"), 300, 80)
    ledger.record_send(1, Tag("ctrl", 1, "hello"), 0, 50)
    ledger.record_rejected("bad_msgpack")
    ledger.record_rejected("unconsumed", 3)
    return ledger


def test_totals_split_directions_and_kinds() -> None:
    ledger = filled()
    assert ledger.totals("data") == {
        "sent": {"messages": 3, "payload_bytes": 1200, "framing_bytes": 273},
        "received": {"messages": 1, "payload_bytes": 300, "framing_bytes": 80},
    }
    assert ledger.totals("control")["sent"] == {
        "messages": 1, "payload_bytes": 0, "framing_bytes": 50,
    }  # fmt: skip
    with pytest.raises(ValueError, match="traffic kind"):
        ledger.totals("ctrl")


def test_per_round_and_per_link() -> None:
    ledger = filled()
    rounds = ledger.per_round()
    assert list(rounds) == [0, 1]
    assert rounds[0]["data"]["sent"] == {"messages": 2, "payload_bytes": 800, "framing_bytes": 181}
    assert rounds[1]["data"]["received"]["payload_bytes"] == 300
    assert rounds[1]["control"]["sent"]["messages"] == 1
    links = ledger.per_link()
    assert list(links) == [(0, 1), (0, 2), (1, 0)]
    assert links[(0, 1)]["data"] == {"messages": 2, "payload_bytes": 800, "framing_bytes": 182}
    assert links[(0, 1)]["control"]["framing_bytes"] == 50
    assert links[(1, 0)]["data"]["messages"] == 1


def test_wire_bytes_counts_sent_data_cumulatively() -> None:
    ledger = filled()
    assert ledger.wire_bytes(through_round=0) == 800 + 181
    assert ledger.wire_bytes() == ledger.wire_bytes(through_round=1) == 1200 + 273


def test_json_is_plain_and_complete() -> None:
    data = json.loads(json.dumps(filled().to_json()))
    assert data["node"] == 0
    assert data["rejected"] == {"bad_msgpack": 1, "unconsumed": 3}
    assert data["cells"][0] == {
        "src": 0, "dst": 1, "round": 0, "traffic": "data", "messages": 1, "payload_bytes": 400,
        "framing_bytes": 90,
    }  # fmt: skip
    assert sum(cell["payload_bytes"] for cell in data["cells"]) == 1500
    assert data["totals"]["data"]["sent"]["messages"] == 3
