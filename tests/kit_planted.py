"""Push-Sum (tests/plugins/push_sum) with the two mistakes the exactness kit must catch, and the
kit's checks of it and of them, run in a process where all three are registered protocols
(tests/test_testing_kit.py installs them as a distribution and runs `python -m
tests.kit_planted OUT.json`, which writes each check's outcome)."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from push_sum import PushSum

from protocols.sdk import Payload, dense


class PushSumForgetsWeight(PushSum):
    """The newcomer's bug: the weight left out of the checkpoint. A resumed node restarts it
    at 1 and the run ends, exit 0, with other models."""

    checkpoint_fields = ("sgd",)


class PushSumDeclaresXAlone(PushSum):
    """Sends {x, w} and declares the bits of x alone."""

    def message(self, x: dict[str, torch.Tensor], w: torch.Tensor) -> Payload:
        return Payload({**x, "w": w}, dense(x).bits)


def push_sum_bits(run: object, r: int, src: int, dst: int) -> int:
    """The paper's count: the scaled model and the weight, 32 bits per value, per link."""
    from dfl_mesh.testing import FinishedRun

    assert isinstance(run, FinishedRun)
    return (run.model_values(src) + 1) * 32


def cases(work: Path) -> dict[str, Callable[[], object]]:
    from dfl_mesh.testing import (
        assert_formula_bits,
        assert_resume_exact,
        audit_checkpoint_fields,
    )

    def audit_sees_weight(name: str) -> Callable[[], object]:
        def check() -> object:
            audit = audit_checkpoint_fields(name, workdir=work / f"audit-{name}")
            return sorted(audit.changed)
        return check

    def bits_charged(name: str) -> Callable[[], object]:
        def check() -> object:
            run = assert_formula_bits(name, push_sum_bits, workdir=work / f"bits-{name}")
            return sum(sum(bits.values()) for bits in run.charged.values())
        return check

    return {
        "audit push-sum": audit_sees_weight("push-sum"),
        "audit push-sum-forgets-weight": audit_sees_weight("push-sum-forgets-weight"),
        "resume push-sum-forgets-weight": lambda: assert_resume_exact(
            "push-sum-forgets-weight", kill_after_round=1, workdir=work / "resume-forgets"),
        "bits push-sum": bits_charged("push-sum"),
        "bits push-sum-declares-x-alone": bits_charged("push-sum-declares-x-alone"),
    }


def main(out: Path) -> None:
    """Run every case; write {case: {"passed": bool, "said": reason or result}}."""
    outcomes = {}
    with tempfile.TemporaryDirectory(prefix="kit-planted-") as tmp:
        for name, check in cases(Path(tmp)).items():
            try:
                outcomes[name] = {"passed": True, "said": check()}
            except AssertionError as exc:
                outcomes[name] = {"passed": False, "said": str(exc)}
    out.write_text(json.dumps(outcomes, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
