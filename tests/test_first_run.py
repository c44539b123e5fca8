"""A first run is quick and the paper is one `--config` away: the ssd-fl family's shipped
defaults are the small first run, and protocols/configs/ssd-fl-paper.yaml over them gives back the
paper's model and local epochs (dsc-paper.yaml the DSC family's test pool); bench.first_run's
estimate of a default job from what a watch saw (no mesh runs here: `python -m bench.first_run`
measures)."""

from __future__ import annotations

import pytest

from bench.first_run import Watch, Watched, done_watching, parse, topology_of
from launcher.config.layers import preset_file, resolve_config

FAMILY = ("ssd-fl", "sdfl", "pdfl", "stc", "cstc")
DSC_FAMILY = ("dsc", "dsc-noagg", "dsc-fedavg", "dsc-max", "dsc-fedamp")


@pytest.mark.parametrize("protocol", FAMILY)
def test_the_ssdfl_family_defaults_are_a_first_run_and_the_paper_file_restores_the_paper(
        protocol: str) -> None:
    quick = resolve_config(protocol, None, {}, ())
    paper = resolve_config(protocol, preset_file("ssd-fl-paper"), {}, ())
    assert quick["model"]["name"] == "cnn" and quick["hyper"]["local_steps"] == 5
    assert paper["model"] == {"name": "ssdfl-cnn"} and paper["hyper"]["local_steps"] == "epoch"
    for key in ("rounds", "eval_every", "partition", "dataset", "eval_split", "cycle_metrics"):
        assert paper[key] == quick[key], key
    assert (quick["rounds"], quick["eval_every"]) == (20, 1)
    assert topology_of(protocol) == "er30"


@pytest.mark.parametrize("protocol", DSC_FAMILY)
def test_the_dsc_family_tests_a_first_run_on_a_small_pool_and_the_paper_file_restores_it(
        protocol: str) -> None:
    quick = resolve_config(protocol, None, {}, ())
    paper = resolve_config(protocol, preset_file("dsc-paper"), {}, ())
    assert quick["scenes"]["test_size"] == 200 and paper["scenes"]["test_size"] == 650
    assert {**paper["scenes"], "test_size": 200} == quick["scenes"]
    assert topology_of(protocol) == "rgg10"


def test_an_estimate_is_first_progress_plus_the_remaining_rounds_at_the_watched_pace() -> None:
    seen = Watched(rounds=20, eval_every=5, arrivals={5: 12.0, 10: 22.0})
    assert seen.first_progress_s == 12.0
    assert seen.per_round_s(30.0) == (2.0, True)
    assert seen.estimate_s(30.0) == (12.0 + 15 * 2.0, True)
    assert done_watching(seen, Watch(span=2, limit_s=1, note=""))


def test_one_evaluation_gives_only_a_lower_bound_and_a_finished_job_its_own_time() -> None:
    seen = Watched(rounds=30, eval_every=10, arrivals={10: 40.0})
    assert not done_watching(seen, Watch(span=2, limit_s=1, note=""))
    assert seen.estimate_s(60.0) == (40.0 + 20 * 2.0, False)
    done = Watched(rounds=3, eval_every=1, arrivals={1: 5.0, 2: 6.0, 3: 7.0}, ended_s=8.5,
                   exit_code=0)
    assert done.estimate_s(9.0) == (8.5, True)
    assert Watched(rounds=3, eval_every=1).estimate_s(9.0) == (None, False)


def test_only_evaluation_lines_count_as_progress() -> None:
    assert parse('{"accuracy": 0.5, "node": 0, "round": 5}\n') == 5
    assert parse("run_dir: runs/x  avg_accuracy=0.5\n") is None
    assert parse('["round"]') is None
