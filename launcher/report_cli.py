"""`dfl-report RUN_DIR...`: the paper-style tables over seeds, overlay plots, an offline page.

Exit codes: 0 done, 2 bad input (one line on stderr naming the file and the reason, nothing on
stdout).
"""

from __future__ import annotations

from pathlib import Path

import click

from launcher.errors import LaunchError, run_cli
from launcher.logs import launcher_logger
from launcher.results.report import build_report
from launcher.results.report_html import to_html
from launcher.results.report_plots import table_plots
from launcher.results.report_text import RENDERERS, skipped_text

LOG = launcher_logger("report")


def write(path: Path, data: str | bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data, encoding="utf-8")
    except OSError as exc:
        raise LaunchError(f"{path}: cannot write ({exc.strerror})") from exc


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(sorted(RENDERERS)), default="markdown",
              show_default=True, help="What is printed on stdout.")
@click.option("--plots", "plots_dir", type=click.Path(path_type=Path), default=None,
              help="Write the overlay plots (PNG) into this folder.")
@click.option("--html", "html_path", type=click.Path(path_type=Path), default=None,
              help="Write one self-contained page (tables and plots inlined) to this file.")
def cli(run_dirs: tuple[Path, ...], fmt: str, plots_dir: Path | None,
        html_path: Path | None) -> None:
    """Group runs that differ only in their seed; print each family's table (mean +- 95%
    t-interval over seeds). A RUN_DIR may be a folder of runs, e.g. a --seeds output."""
    report = build_report(list(run_dirs))
    if plots_dir is not None:
        for table in report.tables:
            for plot in table_plots(table):
                write(plots_dir / plot.name, plot.png)
    if html_path is not None:
        write(html_path, to_html(report))
    for line in skipped_text(report):
        LOG.warning("%s", line)
    click.echo(RENDERERS[fmt](report), nl=False)


def main() -> None:
    run_cli(cli, "dfl-report")


if __name__ == "__main__":
    main()
