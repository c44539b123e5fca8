"""The manual: a short README whose links resolve, a site that builds strictly, a CLI reference
that lists every option the programs take, and no path outside the repository anywhere."""

from __future__ import annotations

import html
import importlib
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CLI_PAGE = ROOT / "docs" / "cli.md"
MAX_README_LINES = 200
# What CI runs (.ci/run): the README must keep saying exactly this.
TEST_COMMANDS = (".venv/bin/python -m pytest -q", ".venv/bin/python -m pytest -q -m slow")
# Paths into the workspace around the repository, which a user of the package does not have.
# Spelled in pieces so that this file does not match itself.
OUTSIDE = tuple("/".join(parts) for parts in (("..", "shared"), ("shared", "specs"),
                                              ("shared", "papers")))
MARKDOWN_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CLICK_BLOCK = re.compile(r"^::: mkdocs-click\n((?:[ \t]+:\w+:.*\n)+)", re.MULTILINE)
CLICK_OPTION = re.compile(r"^\s+:(\w+):\s*(.*)$", re.MULTILINE)


def test_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines"


def test_readme_keeps_the_test_commands_ci_runs() -> None:
    lines = {line.strip() for line in README.read_text(encoding="utf-8").splitlines()}
    for command in TEST_COMMANDS:
        assert command in lines or any(line.endswith("&& " + command) for line in lines), command


def test_readme_links_point_at_files() -> None:
    targets = MARKDOWN_LINK.findall(README.read_text(encoding="utf-8"))
    local = [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not
             t.startswith("#")]
    assert local, "README.md links to no page of the manual"
    missing = [t for t in local if not (README.parent / t.split("#", 1)[0]).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


def test_no_file_names_a_path_outside_the_repository() -> None:
    """Every file git tracks or would add (code, docs, configuration) is self-contained."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
            capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no list of the repository's files")
    offenders = []
    for name in sorted({n for n in listed.decode().split("\0") if n}):
        path = ROOT / name
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        found = [p for p in OUTSIDE if p.encode() in data]
        if found:
            offenders.append(f"{name}: {', '.join(found)}")
    assert not offenders, "files naming paths outside the repository:\n" + "\n".join(offenders)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once by `mkdocs build --strict` (any warning fails it)."""
    for module in ("mkdocs", "material", "mkdocs_click"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed: pip install -e '.[docs]' builds the manual")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-4000:]}"
    return out


def test_the_site_builds_strictly(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "cli" / "index.html").is_file()


def test_the_example_notebook_is_a_page_with_its_outputs(site: Path) -> None:
    """docs/examples/own-protocol.ipynb, executed (tests/test_example_notebook.py), as a page
    (docs/hooks/notebooks.py) beside the notebook itself."""
    page = (site / "examples" / "own-protocol" / "index.html").read_text(encoding="utf-8")
    shown = html.unescape(re.sub(r"<[^>]+>", "", page))  # the code, its highlighting aside
    assert "class Diffusion(ProtocolNode[TrainingHyper])" in shown
    assert 'src="data:image/png;base64,' in page
    assert (site / "examples" / "own-protocol.ipynb").is_file()


def documented_programs() -> dict[str, click.Command]:
    """The click command behind each `::: mkdocs-click` block of the CLI page, by program."""
    programs = {}
    for block in CLICK_BLOCK.findall(CLI_PAGE.read_text(encoding="utf-8")):
        options = dict(CLICK_OPTION.findall(block))
        command = getattr(importlib.import_module(options["module"]), options["command"])
        assert isinstance(command, click.Command), options
        programs[options["prog_name"]] = command
    return programs


def test_the_cli_page_documents_every_installed_program() -> None:
    with (ROOT / "pyproject.toml").open("rb") as f:
        scripts = tomllib.load(f)["project"]["scripts"]
    assert set(documented_programs()) == set(scripts)


def command_paths(prog: str, command: click.Command) -> dict[str, click.Command]:
    """Every command and sub-command (at any depth), by its full command path."""
    paths = {prog: command}
    if isinstance(command, click.Group):  # as click lists them: some load on demand
        context = click.Context(command)
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            assert sub is not None, f"{prog} lists {name!r} but has no such command"
            paths.update(command_paths(f"{prog} {name}", sub))
    return paths


def sections(page: str, paths: list[str]) -> dict[str, str]:
    """Each command's part of the page: from its heading (id: the command path, slugified as
    mkdocs-click does) to the next command's heading."""
    starts = {}
    for path in paths:
        found = re.search(rf'<h\d id="{re.escape(path.replace(" ", "-"))}"', page)
        assert found, f"the CLI reference has no section for {path!r}"
        starts[path] = found.start()
    order = sorted(starts, key=starts.__getitem__)
    ends = [starts[p] for p in order[1:]] + [len(page)]
    return {path: page[starts[path]:end] for path, end in zip(order, ends, strict=True)}


def test_every_option_is_in_the_cli_reference(site: Path) -> None:
    page = (site / "cli" / "index.html").read_text(encoding="utf-8")
    assert "Sentinel" not in page, "a click default sentinel leaked into the reference"
    commands = {}
    for prog, command in documented_programs().items():
        commands.update(command_paths(prog, command))
    parts = sections(page, list(commands))
    missing = []
    for path, command in commands.items():
        for param in command.params:
            if not isinstance(param, click.Option) or param.hidden:
                continue
            for flag in (*param.opts, *param.secondary_opts):
                if f"<code>{html.escape(flag)}</code>" not in parts[path]:
                    missing.append(f"{path} {flag}")
    assert not missing, f"options missing from the CLI reference: {missing}"
