"""The manual's gallery (docs/reporting.md): small real runs of each protocol family,
`dfl-report` over them, and one example image of each kind of figure copied into bench/gallery/.

    python -m bench.gallery [--out runs/gallery] [--images bench/gallery]

Every run is a real mesh (in-process transport, the shipped rgg10 topology, seeds 0-2) on a
budget of a few minutes on two cores: the synthetic task for the DMFL-SQ and SSD-FL families,
tiny procedural scenes for DSC. The runs are sweeps (docs/sweeps.md): bench/sweeps/gallery.yaml,
then dsc, one sweep per seed since each dsc seed is measured against the no-aggregation run of
the same seed (`delta_baseline`). Run directories are OUT/<name>/rgg10/defaults/seed-<s>; a
finished run is skipped, so a second call only redraws. Then `dfl-report` writes the tables
(OUT/report.md), its overlay plots and the offline page (OUT/report.html). Copied into
--images: one overlay plot of each kind, a screenshot of the page (when Debian's chromium is
installed), and each kind of per-run plot that a run left in its `plots/` folder. It prints
what it ran, for the manual.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import sweeps
from launcher.api.settings import keyword_spec
from launcher.config.options import command_line
from launcher.sweep.grid import points
from launcher.sweep.spec import SweepSpec, Variant

ROOT = Path(__file__).resolve().parents[1]
SWEEP = "gallery"  # bench/sweeps/gallery.yaml
BASELINE = "dsc-noagg"  # its variant that dsc is measured against
PER_RUN = ("dmfl-sq", "ssd-fl", "dsc")  # a run of each family, for the per-run plots
REPORT_PLOTS = {  # the overlay plot shown for each kind
    "report-accuracy-vs-round.png": "dmfl-sq-local-accuracy-vs-round.png",
    "report-worst-vs-round.png": "dmfl-sq-local-worst-vs-round.png",
    "report-accuracy-vs-bits.png": "dmfl-sq-local-accuracy-vs-bits.png",
}


def run(cmd: list[str], shown: list[str], stdout: Path | None = None) -> None:
    """Run one command from the repository root; stop the gallery if it fails."""
    print("  $ " + shlex.join(shown), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"gallery: {shlex.join(shown)} failed (exit {proc.returncode}): "
                         f"{proc.stderr.strip()[-1500:]}")
    if stdout is not None:
        stdout.write_text(proc.stdout)


def run_all(out: Path) -> None:
    """The gallery's sweep, then dsc: per seed, a sweep against that seed's dsc-noagg run."""
    spec = sweeps.load(SWEEP).model_copy(update={"out": ROOT / out})
    print(f"  $ dfl-launch sweep {below_root(sweeps.HERE / f'{SWEEP}.yaml')}"
          f"  # with out: {out}", flush=True)
    result = sweeps.run(spec, "gallery")
    baseline = next(v for v in spec.variants if v.name == BASELINE)
    dsc = Variant(name="dsc", protocol="dsc", settings=baseline.settings)
    for point in (p for p in result.points if p.variant.name == BASELINE):
        settings = {**spec.settings, "delta_baseline": str(below_root(point.run_dir))}
        per_seed = SweepSpec(out=spec.out, variants=[dsc], topologies=spec.topologies,
                             seeds=[point.seed], settings=settings)
        (run_dir,) = (p.run_dir for p in points(per_seed))
        shown = command_line(keyword_spec(point.topology, dsc.protocol, None,
                                          {**settings, **dsc.settings, "seed": point.seed}, {}))
        print("  $ " + shlex.join(["dfl-launch", *shown, "--out", str(below_root(run_dir))]),
              flush=True)
        sweeps.run(per_seed.model_copy(update={"settings": {
            **settings, "delta_baseline": str(point.run_dir)}}), f"gallery (dsc {point.seed})")


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
        for plot in sorted((out / family / "rgg10" / "defaults" / "seed-0" / "plots")
                           .glob("*.png")):
            kinds.setdefault(plot.name, plot)
    for name, plot in kinds.items():
        shutil.copyfile(plot, images / f"run-{name}")
    if not kinds:
        notes.append(f"no per-run plots in {out}/*/rgg10/defaults/seed-0/plots")
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
