"""The radio link formulas: packets, loss from distance and SNR, expected and sampled time."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dfl_node.netsim import radio
from dfl_node.netsim.virtual_clock import LinkModel
from dfl_node.settings.link import LinkSettings


def test_packetisation_of_the_papers_message_sizes() -> None:
    assert radio.packets(44_706_048, 1500) == 29_805  # ResNet-18, 44.71 MB
    assert radio.packets(44_706_048 + 96, 1500) == 29_805  # + the 3-task policy
    assert radio.packets(85_138_688, 1500) == 56_760  # ResNet-34
    assert radio.packets(1500, 1500) == 1 and radio.packets(1501, 1500) == 2
    assert radio.packets(0, 1500) == 0


def test_outage_loss_follows_the_spec_formula() -> None:
    cfg = LinkSettings(loss_model="outage", snr0_db=10.0)
    # At d = d0 the mean SNR is SNR_0 = 10; threshold 2^2 - 1 = 3.
    assert radio.loss_probability(0.1, cfg, 0.1) == pytest.approx(1 - math.exp(-0.3))
    # Twice as far: SNR / 2^3.
    assert radio.loss_probability(0.2, cfg, 0.1) == pytest.approx(1 - math.exp(-2.4))
    assert radio.loss_probability(5.0, cfg, 0.1) == radio.P_MAX  # clipped
    near, far = (radio.loss_probability(d, cfg, 0.1) for d in (0.15, 0.3))
    assert near < far
    louder = LinkSettings(loss_model="outage", snr0_db=20.0)
    assert radio.loss_probability(0.3, louder, 0.1) < far


def test_ber_loss_is_per_bit_errors_over_a_packet() -> None:
    cfg = LinkSettings(loss_model="ber", snr0_db=6.0, packet_bytes=100)
    gamma = 10 ** 0.6
    bit = 0.5 * math.erfc(math.sqrt(gamma))
    expected = 1 - (1 - bit) ** 800
    assert radio.loss_probability(0.1, cfg, 0.1) == pytest.approx(expected, rel=1e-12)


def test_expected_mode_is_eq5() -> None:
    assert radio.expected_transmissions(29_805, 0.0) == 29_805
    assert radio.expected_transmissions(10, 0.5) == 20


def sampled_model(seed: int, loss: float = 0.3) -> LinkModel:
    topology = {"nodes": [{"id": 0}, {"id": 1}], "edges": [{"u": 0, "v": 1, "loss": loss}]}
    return LinkModel.from_plan(topology, {"retransmissions": "sampled"}, seed=seed)


def test_sampled_mode_is_deterministic_for_a_seed_and_its_mean_approaches_expected() -> None:
    n_packets, frames = 100, 2000
    a, b, c = (sampled_model(s) for s in (7, 7, 8))
    draws = [a.transmissions((0, 1), n_packets, f) for f in range(frames)]
    assert draws == [b.transmissions((0, 1), n_packets, f) for f in range(frames)]
    assert draws != [c.transmissions((0, 1), n_packets, f) for f in range(frames)]
    assert draws != [a.transmissions((1, 0), n_packets, f) for f in range(frames)]
    assert all(d >= n_packets and d == int(d) for d in draws)
    assert len(set(draws)) > 10  # it really samples
    expected = radio.expected_transmissions(n_packets, 0.3)  # 142.857
    assert np.mean(draws) == pytest.approx(expected, rel=0.01)
    assert np.mean(draws[:20]) != pytest.approx(expected, rel=1e-6)
    assert sampled_model(7, loss=0.0).transmissions((0, 1), n_packets, 0) == n_packets


def test_distance_models_need_positions() -> None:
    topology = {"nodes": [{"id": 0}, {"id": 1}], "edges": [[0, 1]]}
    with pytest.raises(ValueError, match="needs node positions"):
        LinkModel.from_plan(topology, {"loss_model": "outage"})
    placed = {"nodes": [{"id": 0, "position": [0.0, 0.0]}, {"id": 1, "position": [0.2, 0.0]}],
              "edges": [[0, 1]]}
    model = LinkModel.from_plan(placed, {"loss_model": "outage", "snr0_db": 10.0})
    assert model.links[(0, 1)].loss == pytest.approx(1 - math.exp(-2.4))  # d0 = 0.1 x side 1


@pytest.mark.parametrize(("link", "needle"), [
    ({"loss": 1.0}, "loss: must be < 1, got 1"),
    ({"packet_bytes": 0}, "packet_bytes"),
    ({"bandwidth_mbps": 0}, "bandwidth_mbps"),
    ({"loss_model": "magic"}, "loss_model: input should be 'fixed', 'outage' or 'ber'"),
    ({"retransmissions": "often"}, "retransmissions: input should be 'expected' or 'sampled'"),
    ({"latency_ms": "fast"}, "latency_ms: input should be a valid number"),
    ({"nope": 1}, "unknown key"),
])
def test_bad_link_options_are_one_line_errors(link: dict, needle: str) -> None:
    topology = {"nodes": [{"id": 0}, {"id": 1}], "edges": [[0, 1]]}
    with pytest.raises(ValueError, match=needle) as info:
        LinkModel.from_plan(topology, link)
    assert "\n" not in str(info.value)
