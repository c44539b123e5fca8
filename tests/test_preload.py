"""The zygote's warm-up: a GPU mesh's zygote must run no backward pass (it would start the
CUDA driver before the fork, and every node's first CUDA call would fail)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from launcher.backends.processes import warm_up_mode
from launcher.backends.zygote import Zygote

BACKWARDS: list[int] = []  # one entry per backward pass in this process (or a fork of it)


def count_backward(tensor: torch.Tensor, *args: object, **kwargs: object) -> None:
    BACKWARDS.append(1)


def report_backwards(path: str) -> None:
    """A node: writes how many backward passes the zygote it was forked from ran."""
    Path(path).write_text(str(len(BACKWARDS)))


@pytest.mark.parametrize(("full", "backwards"), [(False, "0"), (True, "2")])
def test_the_warm_up_runs_backward_only_in_full_mode(tmp_path: Path, full: bool, backwards: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.Tensor, "backward", count_backward)
    zygote = Zygote(report_backwards)
    try:
        zygote.warm_up(full)
        out = tmp_path / "count"
        (node,) = zygote.start([(str(out),)])
        node.join(60)
        assert node.exitcode == 0
    finally:
        zygote.close()
    assert out.read_text() == backwards
    assert not BACKWARDS  # all of it happened in the zygote


def test_a_mesh_with_any_gpu_node_warms_up_forward_only() -> None:
    assert warm_up_mode(["cpu", "cpu"]) == "full"
    assert warm_up_mode(["cpu", "cuda:0"]) == "forward"
    assert warm_up_mode(["cuda:1"]) == "forward"
