"""The exactness kit (dfl_mesh.testing) on a protocol it must pass and on planted mistakes it must
catch: Push-Sum (tests/plugins/push_sum), the same with its weight left out of
`checkpoint_fields`, and the same declaring the bits of x alone for a message of {x, w}
(tests/kit_planted.py).

The three are registered as an installed distribution would register them (a .dist-info with
entry points on the path), in a process of their own: the registry is read once per process.
One such process runs every check and writes its outcomes; the tests here read them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dfl_mesh.testing import assert_formula_bits, audit_checkpoint_fields
from dfl_mesh.testing.formula import HandCount
from tests.harness import ROOT, installed_env, run_plugin_tests

PUSH_SUM = ROOT / "tests" / "plugins" / "push_sum"

ENTRY_POINTS = """\
[dfl_mesh.protocols]
push-sum = push_sum:PushSum
push-sum-forgets-weight = tests.kit_planted:PushSumForgetsWeight
push-sum-declares-x-alone = tests.kit_planted:PushSumDeclaresXAlone
"""


@pytest.fixture(scope="module")
def planted_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An environment in which Push-Sum and the planted subclasses are installed protocols."""
    return installed_env(tmp_path_factory.mktemp("site"), "dfl-kit-planted", ENTRY_POINTS,
                         PUSH_SUM)


@pytest.fixture(scope="module")
def outcomes(planted_env: dict[str, str],
             tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    out = tmp_path_factory.mktemp("outcomes") / "outcomes.json"
    done = subprocess.run([sys.executable, "-m", "tests.kit_planted", str(out)], cwd=ROOT,
                          env=planted_env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    data: dict[str, dict[str, Any]] = json.loads(out.read_text())
    return data


def test_the_push_sum_plugins_own_tests_pass_with_the_kit(planted_env: dict[str, str],
                                                          tmp_path: Path) -> None:
    """tests/plugins/push_sum/tests: the kit's four checks on a directed graph, as the
    plugin's author runs them; the plugin itself is at most 35 lines of code."""
    out = run_plugin_tests(PUSH_SUM, planted_env, tmp_path)
    assert "4 passed" in out, out[-2000:]


def test_the_audit_passes_push_sum_and_saw_its_weight(outcomes: dict[str, Any]) -> None:
    audit = outcomes["audit push-sum"]
    assert audit["passed"], audit["said"]
    assert audit["said"] == ["sgd.batches._order", "sgd.batches.rng", "weight"]


def test_the_audit_names_the_forgotten_weight(outcomes: dict[str, Any]) -> None:
    audit = outcomes["audit push-sum-forgets-weight"]
    assert not audit["passed"]
    assert "leaves out" in audit["said"] and ": weight (float; node 0, round 0)." in audit["said"]
    assert "\n" not in audit["said"]


def test_resume_fails_without_the_weight(outcomes: dict[str, Any]) -> None:
    """(Push-Sum itself resumes exactly: its own tests, above.)"""
    forgot = outcomes["resume push-sum-forgets-weight"]
    assert not forgot["passed"]
    said = forgot["said"]
    assert said.startswith("push-sum-forgets-weight: killed after round 1 and resumed, the run "
                           "ends otherwise than uninterrupted: final/node-"), said
    assert said.endswith("checkpoint_fields leaves out weight (float; node 0, round 0)"), said


def test_formula_bits_pass_push_sum_and_fail_on_bits_of_x_alone(
        outcomes: dict[str, Any]) -> None:
    honest = outcomes["bits push-sum"]
    assert honest["passed"], honest["said"]
    # the kit's default MLP (one hidden layer of 64) on the synthetic data's 32 features and 10
    # classes; (P + 1) 32 bits on each of the kit topology's 10 directed links in each of 3 rounds
    p = (32 + 1) * 64 + (64 + 1) * 10
    assert honest["said"] == 10 * 3 * (p + 1) * 32
    wrong = outcomes["bits push-sum-declares-x-alone"]
    assert not wrong["passed"]
    assert wrong["said"] == (f"push-sum-declares-x-alone: round 0, link 0->1: the payloads "
                             f"declared {p * 32} bits (values {p * 32}), the hand count says "
                             f"{(p + 1) * 32}")


# The shipped protocols that learn on the kit's synthetic mesh, and what of each the audit must
# leave out: SSD-FL's eq. 10 buffers (protocols/ssdfl/direction.py) are reset at every round's
# start, before they are read.
SHIPPED_AUDITS = {"d-psgd": (), "dsgt": (), "choco-sgd": (), "dmfl-sq": (), "qffl": (),
                  "ssd-fl": ("direction",), "sdfl": ("direction",), "stc": ("direction",)}


@pytest.mark.parametrize("protocol", sorted(SHIPPED_AUDITS))
def test_every_value_a_shipped_round_changes_is_checkpointed(protocol: str,
                                                             tmp_path: Path) -> None:
    audit = audit_checkpoint_fields(protocol, workdir=tmp_path, ignore=SHIPPED_AUDITS[protocol])
    assert audit.changed and all(change.covered for change in audit.changed.values())


def test_the_audit_without_ignore_names_ssd_fls_round_scratch(tmp_path: Path) -> None:
    """The ignore entries above are not stale: without them the audit names those buffers."""
    with pytest.raises(AssertionError,
                       match=r"direction\._momentum\['1\.weight'\] \(tensor; node 0, round 0\)"):
        audit_checkpoint_fields("ssd-fl", workdir=tmp_path)


def dense_models(copies: int) -> HandCount:
    """`copies` dense float32 models per link and round (D-PSGD: 1, DSGT: 2, with y)."""
    return lambda run, r, src, dst: copies * run.model_values(src) * 32


@pytest.mark.parametrize("protocol, count", [("d-psgd", dense_models(1)),
                                             ("dsgt", dense_models(2)),
                                             ("choco-sgd", None), ("dmfl-sq", None)])
def test_shipped_formula_bits_are_charged_where_messages_went(
        protocol: str, count: HandCount | None, tmp_path: Path) -> None:
    run = assert_formula_bits(protocol, count, workdir=tmp_path)
    assert len(run.charged) == 3 * 10  # every directed link of the kit's topology, every round
