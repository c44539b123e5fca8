"""Task metrics and the relative improvement of paper Eq. 42-44
(docs/protocols/dsc.md#metrics, #a7)."""

from __future__ import annotations

import pytest
import torch

from protocols.dsc.delta import delta_report, relative_change
from protocols.dsc.task_metrics import DepthMeter, L1Meter, NormalMeter, SegMeter
from protocols.dsc.taskdata import IGNORE

# Table 2 (NYU-v2, N = 10): client-averaged absolute metrics, then Delta_Seg, _Sn, _Dep, _all.
TABLE2 = {
    "No aggregation": (28.46, 59.21, 16.54, 13.05, 44.11, 73.12, 83.14,
                       0.565, 0.223, 62.38, 88.72, 96.71),
    "FedAvg (J=1)": (28.89, 59.72, 16.29, 12.83, 44.80, 73.62, 83.66,
                     0.557, 0.219, 63.30, 89.16, 97.14, 1.19, 1.21, 1.12, 1.17),
    "max (J=1)": (29.31, 60.31, 16.30, 12.66, 45.36, 73.78, 84.60,
                  0.570, 0.220, 61.44, 88.81, 97.06, 2.42, 1.99, -0.12, 1.43),
    "FedAMP (J=1)": (29.14, 59.77, 16.23, 12.74, 45.16, 73.80, 84.67,
                     0.553, 0.215, 63.42, 89.48, 97.32, 1.67, 1.88, 1.77, 1.77),
    "Similarity (J=1)": (29.26, 59.92, 16.22, 12.67, 45.33, 73.89, 84.84,
                         0.551, 0.212, 63.49, 89.67, 97.37, 2.01, 2.14, 2.19, 2.11),
    "FedAvg (J=5)": (29.37, 60.87, 16.18, 12.68, 45.25, 74.50, 84.85,
                     0.551, 0.217, 63.94, 90.22, 97.60, 3.00, 2.31, 2.06, 2.46),
    "max (J=5)": (31.87, 64.24, 16.16, 12.77, 45.06, 74.02, 84.90,
                  0.572, 0.226, 61.63, 87.66, 95.55, 10.24, 1.99, -1.24, 3.66),
    "FedAMP (J=5)": (31.21, 61.74, 16.18, 12.57, 45.48, 74.34, 84.91,
                     0.546, 0.213, 63.82, 90.26, 97.63, 6.97, 2.55, 2.57, 4.03),
    "Similarity (J=5)": (31.43, 62.55, 16.15, 12.51, 45.85, 74.69, 84.93,
                         0.541, 0.209, 64.26, 90.49, 97.68, 8.04, 2.95, 3.31, 4.77),
}
KEYS = {"seg": ("miou", "pacc"), "sn": ("mean", "median", "a11", "a22", "a30"),
        "dep": ("abs", "rel", "d1", "d2", "d3")}


def metrics(row: tuple[float, ...]) -> dict[str, dict[str, float]]:
    values = iter(row)
    return {t: {q: next(values) for q in qs} for t, qs in KEYS.items()}


def test_table2_relative_improvements_are_reproduced() -> None:
    base = metrics(TABLE2["No aggregation"])
    worst = 0.0
    for method, row in list(TABLE2.items())[1:]:
        measured = metrics(row)
        deltas = [relative_change(measured[t], base[t], t) for t in KEYS]
        computed = [*deltas, sum(deltas) / 3]
        for got, published in zip(computed, row[12:], strict=True):
            worst = max(worst, abs(got - published))
            assert got == pytest.approx(published, abs=0.015), method
    assert worst == pytest.approx(0.0053, abs=2e-4)  # Similarity J=5 all: 4.7647 vs 4.77


def test_delta_report_averages_clients_then_tasks() -> None:
    """Three clients whose metrics average to a Table 2 row give its published Deltas."""
    base, row = metrics(TABLE2["No aggregation"]), metrics(TABLE2["Similarity (J=5)"])
    portfolios = {0: ("seg", "sn", "dep"), 1: ("seg", "dep"), 2: ("sn", "dep")}

    def spread(source: dict, factors: dict[int, tuple[float, ...]]) -> dict:
        """Per-client metrics: the row scaled by factors that average to 1 over the holders."""
        out: dict[int, dict] = {i: {} for i in portfolios}
        for t in KEYS:
            holders = [i for i, p in portfolios.items() if t in p]
            for i, f in zip(holders, factors[len(holders)], strict=True):
                out[i][t] = {q: v * f for q, v in source[t].items()}
        return out

    noagg = spread(base, {2: (1.02, 0.98), 3: (1.01, 0.97, 1.02)})
    report = delta_report(spread(row, {2: (0.95, 1.05), 3: (1.04, 0.99, 0.97)}), noagg)
    assert report.per_task["seg"] == pytest.approx(8.04, abs=0.015)
    assert report.per_task["sn"] == pytest.approx(2.95, abs=0.015)
    assert report.per_task["dep"] == pytest.approx(3.31, abs=0.015)
    assert report.delta_all == pytest.approx(4.77, abs=0.015)
    assert set(report.per_client[1]) == {"seg", "dep"}
    own = delta_report({0: noagg[0]}, noagg, per_client_baseline=True)
    assert own.per_client[0] == {"seg": 0.0, "sn": 0.0, "dep": 0.0}


def test_direction_rule_signs() -> None:
    assert relative_change({"l1": 0.9}, {"l1": 1.0}, "edge") == pytest.approx(10.0)
    assert relative_change({"miou": 55.0, "pacc": 50.0}, {"miou": 50.0, "pacc": 50.0},
                           "seg") == pytest.approx(5.0)


def test_segmentation_miou_and_pixel_accuracy() -> None:
    target = torch.tensor([[[0, 0, 1, 1], [2, 2, IGNORE, 1]]])
    labels = torch.tensor([[[0, 1, 1, 1], [2, 0, 2, 1]]])
    meter = SegMeter(4)
    meter.update(torch.nn.functional.one_hot(labels, 4).permute(0, 3, 1, 2).float(), target)
    # IoU: class 0 = 1/3, class 1 = 3/4, class 2 = 1/2, class 3 has no union
    result = meter.result()
    assert result["miou"] == pytest.approx((1 / 3 + 3 / 4 + 1 / 2) / 3 * 100)
    assert result["pacc"] == pytest.approx(5 / 7 * 100)


def test_normal_angles() -> None:
    target = torch.zeros(1, 3, 1, 4)
    target[0, 2] = 1.0
    target[0, :, 0, 3] = 0.0  # invalid pixel
    angles = torch.deg2rad(torch.tensor([0.0, 20.0, 60.0]))
    pred = torch.zeros(1, 3, 1, 4)
    pred[0, 0, 0, :3] = 2 * torch.sin(angles)  # unnormalised predictions
    pred[0, 2, 0, :3] = 2 * torch.cos(angles)
    meter = NormalMeter()
    meter.update(pred, target)
    r = meter.result()
    assert r["mean"] == pytest.approx(80 / 3, abs=1e-4)
    assert r["median"] == pytest.approx(20.0, abs=1e-4)
    assert (r["a11"], r["a22"], r["a30"]) == pytest.approx((100 / 3, 200 / 3, 200 / 3))


def test_depth_errors_and_thresholds() -> None:
    target = torch.tensor([[[[1.0, 2.0, 4.0, 0.0, 1.0]]]])
    pred = torch.tensor([[[[1.2, 3.0, 4.0, 9.0, -1.0]]]])
    meter = DepthMeter()
    meter.update(pred, target)
    r = meter.result()
    assert r["abs"] == pytest.approx((0.2 + 1.0 + 0.0 + 2.0) / 4)
    assert r["rel"] == pytest.approx((0.2 + 0.5 + 0.0 + 2.0) / 4)
    # ratios 1.2, 1.5, 1.0 and a negative prediction that never passes
    assert (r["d1"], r["d2"], r["d3"]) == pytest.approx((50.0, 75.0, 75.0))


def test_l1() -> None:
    meter = L1Meter()
    meter.update(torch.tensor([0.0, 1.0]), torch.tensor([0.5, 0.0]))
    meter.update(torch.tensor([1.0]), torch.tensor([1.0]))
    assert meter.result() == {"l1": pytest.approx(0.5)}
