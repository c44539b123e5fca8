"""`python -m bench` as a user runs it: a group that cannot measure becomes a row with its
reason, the other groups still run, and the table and the JSON are always written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import bench.__main__ as suite
from bench import compute
from bench.figures import Figure
from bench.launch import last_words

REASON = "bench.bad: the zmq run failed (exit 1): dfl-launch: node 3 died"


def measured(quick: bool) -> list[Figure]:
    return [Figure("good", "a measured figure", 2.5, "s", reps=1 if quick else 5)]


def failed_run(quick: bool) -> list[Figure]:
    raise SystemExit(f"{REASON}\nTraceback ...\nthe launcher's stderr")


def broken(quick: bool) -> list[Figure]:
    raise ValueError("no samples")


def interrupted(quick: bool) -> list[Figure]:
    raise KeyboardInterrupt


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], Any]:
    """main's exit code, the table's lines and the JSON written."""
    out = Path(argv[argv.index("--json") + 1])
    code = suite.main(argv)
    return code, capsys.readouterr().out.splitlines(), json.loads(out.read_text())


def test_failed_groups_become_rows_and_the_others_still_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(suite, "GROUPS", {"bad": failed_run, "good": measured, "worse": broken})
    out = tmp_path / "nested" / "bench.json"
    code, lines, written = run(["--quick", "--json", str(out)], capsys)
    assert code == 1  # a group failed
    rows = [line for line in lines if line.split(" ", 1)[0] in ("bad", "good", "worse")]
    assert rows[0] == f"bad        FAILED: {REASON}"
    assert rows[1].startswith("good       a measured figure")
    assert rows[2] == "worse      FAILED: ValueError: no samples"
    figures = {f["group"]: f for f in written["figures"]}
    assert [f["group"] for f in written["figures"]] == ["bad", "good", "worse"]
    assert (figures["bad"]["outcome"], figures["bad"]["value"]) == ("failed", None)
    assert figures["bad"]["note"] == REASON
    assert figures["bad"]["extra"] == {"detail": "Traceback ...\nthe launcher's stderr"}
    assert (figures["good"]["outcome"], figures["good"]["value"]) == ("measured", 2.5)
    assert figures["worse"]["note"] == "ValueError: no samples"
    assert set(written["machine"]["group_seconds"]) == {"bad", "good", "worse"}
    assert set(written["machine"]["group_cpu_seconds"]) == {"bad", "good", "worse"}
    assert written["state"] == "finished"


def test_ctrl_c_writes_what_was_measured_and_exits_130(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(suite, "GROUPS", {"good": measured, "stop": interrupted,
                                          "never": broken})
    code, lines, written = run(["--json", str(tmp_path / "b.json")], capsys)
    assert code == 130
    assert ("stop       INTERRUPTED: interrupted (SIGINT) 0 s into the group; its figures are "
            "lost") in lines
    assert written["state"] == "interrupted (SIGINT)"
    assert [(f["group"], f["outcome"]) for f in written["figures"]] == [
        ("good", "measured"), ("stop", "interrupted")]


def test_the_quick_suite_runs_a_long_groups_short_part_and_naming_it_runs_it_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    def whole(quick: bool) -> list[Figure]:
        return [Figure("long", f"whole, {'quick' if quick else 'full'}", 1.0, "s")]

    def short(quick: bool) -> list[Figure]:
        return [Figure("long", "short part", 1.0, "s")]

    monkeypatch.setattr(suite, "GROUPS", {"long": whole, "good": measured})
    monkeypatch.setattr(suite, "SHORT", {"long": short})
    for argv, names in ((["--quick"], ["short part", "a measured figure"]),
                        (["--only", "long"], ["whole, quick"]),
                        (["--full"], ["whole, full", "a measured figure"])):
        _, _, written = run([*argv, "--json", str(tmp_path / "b.json")], capsys)
        assert [f["name"] for f in written["figures"]] == names, argv


def test_a_dataset_group_without_its_data_says_what_it_needs_before_any_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    def no_mesh(*args: object, **kwargs: object) -> dict[str, object]:
        raise AssertionError("the dataset check must come before any run")

    monkeypatch.setattr(compute, "launch", no_mesh)
    empty = tmp_path / "data"
    empty.mkdir()
    code, lines, written = run(["--only", "compute", "--data-root", str(empty),
                                "--json", str(tmp_path / "b.json")], capsys)
    assert code == 0  # skipped for want of data is not a failure
    [row] = [line for line in lines if line.startswith("compute")]
    assert row.startswith(f"compute    SKIPPED: cifar10: nothing usable at {empty} ")
    assert "cifar10-jpeg.tar.gz" in row and "--data-root" in row
    [figure] = written["figures"]
    assert (figure["group"], figure["outcome"], figure["value"]) == ("compute", "skipped", None)
    assert figure["note"] == row.removeprefix("compute    SKIPPED: ")
    assert written["machine"]["data_root"] == str(empty)


def test_a_relative_data_root_is_taken_from_where_the_user_stands(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher runs from the repository root: bench hands it an absolute path."""
    monkeypatch.chdir(tmp_path)
    assert suite.parse(["--data-root", "data"]).data_root == tmp_path / "data"


@pytest.mark.parametrize(("stderr", "words"), [
    ("progress\ndfl-launch: cifar10: nothing usable at /d\n\n", "dfl-launch: cifar10: nothing "
     "usable at /d"),
    ("Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n    f()\n"
     "KeyError: 'x'\n\nDuring handling of the above exception, another exception occurred:\n\n"
     "Traceback (most recent call last):\n  File \"a.py\", line 3, in <module>\n    g()\n"
     "tarfile.ReadError: file could not be opened successfully:\n- method gz: not gzip\n",
     "tarfile.ReadError: file could not be opened successfully:"),
    ("", ""),
])
def test_a_failed_runs_row_gives_the_line_that_says_why(stderr: str, words: str) -> None:
    assert last_words(stderr) == words
