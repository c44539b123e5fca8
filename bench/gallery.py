"""The manual's gallery (docs/reporting.md): small real runs of each protocol family,
`dfl-report` over them, and one example image of each kind of figure copied into bench/gallery/.

    python -m bench.gallery [--out runs/gallery] [--images bench/gallery]

Every run is a real mesh (`dfl-launch --seeds 0-2`, in-process transport, the shipped rgg10
topology) on a budget of a few minutes on two cores: the synthetic task for the DMFL-SQ and
SSD-FL families, tiny procedural scenes for DSC (each dsc seed measured against the
no-aggregation run of the same seed). A finished run is reused, so a second call only redraws.
Then `dfl-report` writes the tables (OUT/report.md), its overlay plots and the offline page
(OUT/report.html). Copied into --images: one overlay plot of each kind, a screenshot of the
page (when Debian's chromium is installed), and each kind of per-run plot that `dfl-launch`
left in a run's `plots/` folder. It prints every command it ran, for the manual.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SYNTHETIC = ("--dataset", "synthetic", "--set", "model={name: mlp}")
TINY_SCENES = ("--set", "scenes={size: 16, train_size: 300, test_size: 40, min_size: 8}",
               "--set", "epochs=1", "--set", "depth=1")
SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class Method:
    name: str  # also its folder under --out
    protocol: str
    args: tuple[str, ...]


METHODS = (
    *(Method(p, p, (*SYNTHETIC, "--rounds", "15", "--eval-every", "3",
                    "--set", "eval_split=local")) for p in ("dmfl-sq", "choco-sgd", "d-psgd")),
    *(Method(p, p, (*SYNTHETIC, "--rounds", "8", "--partition", "shards:3",
                    "--set", "local_steps=2",
                    "--set", "cycle_metrics={params_every: 0, thresholds: [0.15, 0.2]}"))
      for p in ("ssd-fl", "stc")),
    Method("dsc-noagg", "dsc-noagg", ("--rounds", "2", *TINY_SCENES)),
)
DSC = Method("dsc", "dsc", ("--rounds", "2", *TINY_SCENES))
PER_RUN = ("dmfl-sq", "ssd-fl", "dsc")  # a run of each family, for the per-run plots
REPORT_PLOTS = {  # the overlay plot shown for each kind
    "report-accuracy-vs-round.png": "dmfl-sq-local-accuracy-vs-round.png",
    "report-worst-vs-round.png": "dmfl-sq-local-worst-vs-round.png",
    "report-accuracy-vs-bits.png": "dmfl-sq-local-accuracy-vs-bits.png",
}


def finished(run_dir: Path) -> bool:
    summary = run_dir / "summary.json"
    return summary.is_file() and json.loads(summary.read_text()).get("status") == "ok"


def run(cmd: list[str], shown: list[str], stdout: Path | None = None) -> None:
    """Run one command from the repository root; stop the gallery if it fails."""
    print("  $ " + shlex.join(shown), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"gallery: {shlex.join(shown)} failed (exit {proc.returncode}): "
                         f"{proc.stderr.strip()[-1500:]}")
    if stdout is not None:
        stdout.write_text(proc.stdout)


def launch(method: Method, where: Path, seeds: tuple[str, ...], runs: list[Path]) -> None:
    """One `dfl-launch`, unless the run directories it makes are already finished."""
    if all(finished(ROOT / r) for r in runs):
        return
    args = ["--topology", "rgg10", "--protocol", method.protocol, *method.args,
            "--transport", "inproc", *seeds, "--out", str(where)]
    run([sys.executable, "-m", "launcher.cli", *args], ["dfl-launch", *args])


def run_all(out: Path) -> None:
    for method in METHODS:
        launch(method, out / method.name, ("--seeds", f"{SEEDS[0]}-{SEEDS[-1]}"),
               [out / method.name / f"seed-{s}" for s in SEEDS])
    for seed in SEEDS:  # Delta against the same seed's no-aggregation run
        where, baseline = (out / name / f"seed-{seed}" for name in ("dsc", "dsc-noagg"))
        dsc = replace(DSC, args=(*DSC.args, "--set", f"delta_baseline={baseline}"))
        launch(dsc, where, ("--seed", str(seed)), [where])


def report(out: Path) -> None:
    args = [str(out), "--plots", str(out / "report-plots"), "--html", str(out / "report.html")]
    run([sys.executable, "-m", "launcher.report_cli", *args], ["dfl-report", *args],
        stdout=ROOT / out / "report.md")


def screenshot(page: Path, image: Path) -> bool:
    browser = shutil.which("chromium")
    if browser is None:
        return False
    with tempfile.TemporaryDirectory() as profile:
        run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--no-first-run", f"--user-data-dir={profile}", f"--screenshot={image}",
             "--window-size=1100,1500", page.as_uri()],
            ["chromium", "--headless", f"--screenshot={image.name}", page.name])
    return True


def collect(out: Path, images: Path) -> list[str]:
    """Copy one image of each kind into `images`; what could not be shown, as notes."""
    images.mkdir(parents=True, exist_ok=True)
    notes = []
    for name, source in REPORT_PLOTS.items():
        shutil.copyfile(out / "report-plots" / source, images / name)
    if not screenshot(out / "report.html", images / "report-html.png"):
        notes.append("no chromium: the page's screenshot was not taken")
    kinds: dict[str, Path] = {}  # each kind of per-run plot, from the first family that has it
    for family in PER_RUN:
        for plot in sorted((out / family / "seed-0" / "plots").glob("*.png")):
            kinds.setdefault(plot.name, plot)
    for name, plot in kinds.items():
        shutil.copyfile(plot, images / f"run-{name}")
    if not kinds:
        notes.append(f"no per-run plots in {out}/*/seed-0/plots (dfl-launch --no-plots?)")
    return notes


def below_root(path: Path) -> Path:
    """Commands run from the repository root and are printed for the manual: paths below it
    are given relative to it."""
    path = path.resolve()
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gallery",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "gallery")
    ap.add_argument("--images", type=Path, default=ROOT / "bench" / "gallery")
    opts = ap.parse_args(argv)
    out = below_root(opts.out)
    (ROOT / out).mkdir(parents=True, exist_ok=True)
    run_all(out)
    report(out)
    for note in collect(ROOT / out, opts.images):
        print(f"gallery: {note}", file=sys.stderr)
    print(f"tables: {ROOT / out / 'report.md'}  page: {ROOT / out / 'report.html'}  "
          f"images: {opts.images}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
