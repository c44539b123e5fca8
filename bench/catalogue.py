"""The catalogue of hostile and unlucky cases: what a user who makes mistakes, a machine that
fails and an attacker on the same host try against a run, each case with the tests that show
how it ends. `python -m bench.catalogue` runs those tests (both suites) and prints every case's
verdict and the pass count; `--junit FILE` reads the verdicts of a pytest run that wrote FILE
instead.

The catalogue was first tried by hand on 7984ed7 (d-psgd, synthetic data, a 6-node ring, each
result compared with a clean run of the same seed): 23 of its 42 cases passed. `before` records
that first verdict, so the table shows what changed. Its text named 8 of the 23 passing cases;
the other 15 here are the cases a reviewer of that catalogue would count among them, each held
to a test of its own.

A case passes when every test it names passed (a test function without a parameter id stands
for all its parameters) and at least one ran.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BAD = "tests/test_bad_input.py::test_bad_input_is_exit_2_and_one_line"
RESUME = "tests/test_resume.py"
RUN_DIR = "tests/test_run_directory.py"
FAULTS = "tests/test_run_faults.py"


@dataclass(frozen=True)
class Case:
    what: str
    before: bool  # passed on 7984ed7
    tests: tuple[str, ...]  # pytest node ids


CASES: tuple[Case, ...] = (
    # --- bad input and hostile files ---
    Case("YAML code tags in a topology or config file are refused, never constructed", True,
         (f"{BAD}[topology-code-tag]", f"{BAD}[config-file-code-tag]")),
    Case("a billion-laughs YAML file is refused without expanding it", True,
         (f"{BAD}[topology-billion-laughs]", f"{BAD}[config-file-billion-laughs]")),
    Case("a misspelt key in a config or topology file: exit 2 naming the key meant", True,
         ("tests/test_config_typos.py",)),
    Case("a port another program holds: exit 2 before any node starts", True,
         (f"{BAD}[port-in-use]", f"{BAD}[collector-port-in-use]")),
    Case("a GPU that does not exist: exit 2", True,
         ("tests/test_launcher.py::test_a_gpu_that_does_not_exist_is_bad_input",)),
    Case("the Python API raises InputError for every bad argument", True,
         ("tests/test_api.py::test_bad_input_is_the_command_lines_line",)),
    Case("nothing in the packages deserialises with pickle or torch.load", True,
         ("tests/test_no_unsafe_loading.py",)),
    Case("--resume of a run whose topology file changed is refused", True,
         (f"{RESUME}::test_resume_refuses_a_changed_topology_file",)),
    # --- hostile messages between nodes ---
    Case("11,000 malformed and oversized frames change no result", True,
         ("tests/test_hostile_run.py::test_ten_thousand_hostile_messages_change_nothing",
          "tests/test_hostile_run.py::test_a_mesh_under_attack_counts_every_message_and_"
          "computes_the_clean_result", "tests/test_comm.py::test_hostile_messages_are_counted_"
          "and_change_nothing")),
    Case("stale, expired and unconsumed messages are counted, not used", True,
         ("tests/test_comm.py::test_stale_expired_and_unconsumed_messages_are_counted",)),
    Case("a flood of refused messages does not extend a receive timeout", True,
         ("tests/test_comm.py::test_a_flood_of_rejected_messages_does_not_extend_the_timeout",)),
    Case("the pre-phase coordinator counts and drops what it refuses", True,
         ("tests/test_hostile_run.py::test_the_prephase_coordinator_counts_what_it_refuses",)),
    Case("--secure turns away a keyless client and an unknown key", True,
         ("tests/test_secure.py::test_an_unknown_key_is_refused_at_the_handshake_and_"
          "delivers_nothing",)),
    Case("--secure: a neighbour's key cannot claim another sender", True,
         ("tests/test_secure.py::test_a_neighbours_key_cannot_claim_another_sender",)),
    # --- processes that die or stop ---
    Case("SIGSTOP or SIGKILL of a node: the run stops within the deadline, naming it", True,
         ("tests/test_on_failure.py::test_stop_ends_the_run_naming_the_dead_node_found_within_"
          "a_deadline", "tests/test_launcher.py::test_sigkill_of_a_node_stops_the_run_naming_it")),
    Case("a node busy longer than the deadline is not declared dead", True,
         ("tests/test_on_failure.py::test_a_node_busy_for_longer_than_the_deadline_is_not_"
          "declared_dead",)),
    Case("SIGKILL of the launcher takes every node down", True,
         ("tests/test_launcher.py::test_sigkill_of_the_launcher_takes_every_node_down",)),
    Case("Ctrl-C stops every node: exit 130, status interrupted", True,
         ("tests/test_launcher.py::test_ctrl_c_stops_everything_with_130",
          "tests/test_api.py::test_an_interrupt_stops_every_node_and_resume_finishes")),
    Case("a run killed with SIGKILL resumes to the uninterrupted run's results", True,
         (f"{RESUME}::test_dpsgd_killed_and_resumed_equals_an_uninterrupted_run",
          f"{RESUME}::test_a_metrics_row_the_kill_caught_in_flight_is_written_on_resume")),
    Case("a run stopped by SIGTERM resumes to the uninterrupted run's results", True,
         (f"{RESUME}::test_a_run_stopped_by_a_fault_resumes_exactly[sigterm]",)),
    Case("a run whose zygote died resumes to the uninterrupted run's results", True,
         (f"{RESUME}::test_a_run_stopped_by_a_fault_resumes_exactly[zygote]",)),
    Case("two runs started together on one machine both succeed", True,
         ("tests/test_launcher.py::test_two_runs_started_together_both_succeed",)),
    Case("--on-failure continue stops when the survivors are disconnected", True,
         ("tests/test_on_failure.py::test_continue_stops_when_the_survivors_are_"
          "disconnected",)),
    # --- the 19 that failed on 7984ed7 ---
    Case("a flipped bit in a checkpoint's weights or RNG state is refused, naming the file; "
         "the fall-back resumes exactly", False,
         (f"{RESUME}::test_resume_refuses_a_damaged_checkpoint_before_any_node_starts"
          "[flipped-bit]",
          f"{RESUME}::test_resume_refuses_a_damaged_checkpoint_before_any_node_starts"
          "[rng-state]",
          f"{RESUME}::test_refused_checkpoints_fall_back_to_the_newest_intact_round_and_end_"
          "exactly", "tests/test_sealed_files.py")),
    Case("an older round's checkpoint under a newer name is refused in one line", False,
         (f"{RESUME}::test_resume_refuses_a_damaged_checkpoint_before_any_node_starts"
          "[stale-round]",)),
    Case("a truncated checkpoint is refused in one line naming the file", False,
         (f"{RESUME}::test_resume_refuses_a_damaged_checkpoint_before_any_node_starts"
          "[truncated]",)),
    Case("--out at a folder of the user's files: exit 2, every file kept; --overwrite keeps "
         "what is not a run file", False,
         (f"{RUN_DIR}::test_a_folder_of_the_users_is_refused_and_left_byte_for_byte",
          f"{RUN_DIR}::test_a_run_of_other_inputs_is_refused",
          f"{RUN_DIR}::test_overwrite_replaces_the_run_files_and_keeps_every_other")),
    Case("--out at a regular file: one line, exit 2", False,
         (f"{RUN_DIR}::test_out_at_a_regular_file_is_one_line",)),
    Case("a second launcher in a run directory is refused, naming the first", False,
         (f"{RUN_DIR}::test_a_second_launcher_is_refused_naming_the_first",)),
    Case("forged records from a local process neither reach metrics.jsonl nor end the run",
         False, ("tests/test_results_channel.py::test_a_forged_record_neither_counts_nor_ends_"
                 "the_run", "tests/test_secure.py::test_the_collector_knows_a_record_by_its_key")),
    Case("a collector with another plan than the nodes' refuses in one line", False,
         ("tests/test_results_channel.py::test_collect_with_another_plan_refuses_in_one_line",
          "tests/test_results_channel.py::test_a_node_of_another_plan_is_refused_and_told")),
    Case("a full disk ends the run in one line, the cause in summary.json, no temporary file",
         False, (f"{FAULTS}::test_a_full_disk_ends_the_run_with_its_cause_in_the_summary",)),
    Case("a run directory turned read-only ends the run and says so", False,
         (f"{FAULTS}::test_a_run_directory_turned_read_only_ends_the_run_and_says_so",
          f"{RUN_DIR}::test_an_unfinished_run_on_a_read_only_disk_is_refused_before_it_"
          "starts")),
    Case("SIGTERM (143) and SIGHUP stop the run in order, with a summary", False,
         (f"{FAULTS}::test_sigterm_and_sighup_stop_the_run_in_order",)),
    Case("a killed zygote is named, not a node that was alive", False,
         (f"{FAULTS}::test_a_killed_zygote_is_named_not_a_node",)),
    Case("a 100,000-node ring is refused before its plan", False,
         ("tests/test_limits.py::test_a_ring_of_100000_nodes_is_refused_before_its_plan",
          "tests/test_limits.py::test_one_node_more_than_the_port_range_holds_is_refused",
          "tests/test_limits.py::test_more_node_processes_than_memory_are_refused")),
    Case("a node id of 2**32 is refused before any process starts", False,
         (f"{BAD}[node-id-beyond-the-wire]", f"{BAD}[hub-id-beyond-the-wire]")),
    Case("rounds=10**12 is refused (the rounds ceiling)", False,
         (f"{BAD}[rounds-beyond-the-ceiling]",)),
    Case("lr=1e300 and every hyper-parameter beyond float32 are refused", False,
         (f"{BAD}[lr-overflows-float32]", f"{BAD}[lr-vanishes-in-float32]",
          f"{BAD}[float-overflows-float32]",
          "tests/test_limits.py::test_every_float_of_a_hyper_must_survive_float32")),
    Case("a 50 MB string in a topology file is refused unread", False,
         ("tests/test_limits.py::test_a_fifty_megabyte_topology_name_is_refused_unread",
          "tests/test_limits.py::test_a_config_file_above_the_limit_is_refused_unread",
          f"{BAD}[topology-name-too-long]", f"{BAD}[set-too-long]")),
    Case("a stranger's 4 x 256 MB flood stays within the per-peer cap", False,
         ("tests/test_flood.py",)),
    Case("--resume of a finished run changes no file and says so", False,
         (f"{RUN_DIR}::test_resuming_a_finished_run_changes_no_file",)),
)


def node_ids() -> list[str]:
    return sorted({test for case in CASES for test in case.tests})


def outcomes(junit: Path) -> dict[str, bool]:
    """Node id (file::name[params]) -> passed, from a pytest JUnit XML report."""
    out: dict[str, bool] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        where = case.get("classname", "").replace(".", "/") + ".py"
        failed = any(case.find(tag) is not None for tag in ("failure", "error", "skipped"))
        out[f"{where}::{case.get('name')}"] = not failed
    return out


def verdict(case: Case, results: dict[str, bool]) -> bool:
    """Every test the case names passed, and at least one of them ran."""
    ran: list[bool] = []
    for test in case.tests:
        ran += [ok for node, ok in results.items()
                if node == test or node.startswith(test + "[")
                or ("::" not in test and node.startswith(test + "::"))]
    return bool(ran) and all(ran)


def run_tests(junit: Path) -> int:
    """Both suites' tests of the catalogue, in one pytest session (`-m ''` lifts the default
    suite's `not slow`)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "", "-p", "no:cacheprovider",
           f"--junitxml={junit}", *node_ids()]
    return subprocess.run(cmd, cwd=ROOT, check=False).returncode


def table(results: dict[str, bool]) -> tuple[str, int]:
    lines = ["| # | case | 7984ed7 | now |", "| --- | --- | --- | --- |"]
    passed = 0
    for number, case in enumerate(CASES, start=1):
        ok = verdict(case, results)
        passed += ok
        lines.append(f"| {number} | {case.what} | {'pass' if case.before else 'FAIL'} | "
                     f"{'pass' if ok else 'FAIL'} |")
    before = sum(case.before for case in CASES)
    lines.append(f"\n{passed}/{len(CASES)} pass now ({before}/{len(CASES)} on 7984ed7)")
    return "\n".join(lines), passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.catalogue", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--junit", type=Path,
                        help="read the verdicts from this JUnit XML report instead of running")
    args = parser.parse_args(argv)
    if args.junit is None:
        with tempfile.TemporaryDirectory() as folder:
            junit = Path(folder) / "catalogue.xml"
            run_tests(junit)
            results = outcomes(junit)
    else:
        results = outcomes(args.junit)
    text, passed = table(results)
    print(text)
    return 0 if passed == len(CASES) else 1


if __name__ == "__main__":
    sys.exit(main())
