"""The project's loggers, and the one place a program gives them handlers.

`dfl_mesh.launcher.<part>` is a part of the launcher (launch, plots, report, node, cli);
`dfl_mesh.node.<id>` is one node (`dfl_node.runner.context.node_logger`). Modules only log;
each program's entry point calls `configure` once, so what a user sees is decided there. A
launcher line reads `<prog>: <message>`, the convention of the bad-input line; a node's line is
bare, since its log file (logs/node-<id>.log) already names the node. Warnings and errors go to
stderr. INFO lines are shown only by a program whose stdout is a log (a node's), never by one
whose stdout is data (`dfl-launch`'s JSON lines, `dfl-report`'s tables).
"""

from __future__ import annotations

import logging
import sys

ROOT = "dfl_mesh"
LAUNCHER_LOGGERS = f"{ROOT}.launcher"


def launcher_logger(part: str) -> logging.Logger:
    return logging.getLogger(f"{LAUNCHER_LOGGERS}.{part}")


class SysStreamHandler(logging.StreamHandler):
    """Writes to `sys.stdout` or `sys.stderr` as it is when the record comes, not as it was at
    configuration: a test's capture, or a stream redirected later, gets the line."""

    def __init__(self, which: str) -> None:
        super().__init__(getattr(sys, which))
        self.which = which

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = getattr(sys, self.which)  # under the handler's lock, held by `handle`
        super().emit(record)


class ProgramFormatter(logging.Formatter):
    def __init__(self, prog: str) -> None:
        super().__init__("%(message)s")
        self.prog = prog

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return f"{self.prog}: {text}" if record.name.startswith(LAUNCHER_LOGGERS) else text


def below_warning(record: logging.LogRecord) -> bool:
    return record.levelno < logging.WARNING


def configure(prog: str, info_on_stdout: bool = False) -> None:
    """Warnings and errors of every `dfl_mesh` logger to stderr under `prog`'s name; with
    `info_on_stdout`, INFO lines to stdout too. Calling it again (one process running several
    entry points, as the tests do) replaces the handlers."""
    logger = logging.getLogger(ROOT)
    for old in [h for h in logger.handlers if isinstance(h, SysStreamHandler)]:
        logger.removeHandler(old)
    errors = SysStreamHandler("stderr")
    errors.setLevel(logging.WARNING)
    handlers = [errors]
    if info_on_stdout:
        info = SysStreamHandler("stdout")
        info.addFilter(below_warning)
        handlers.append(info)
    for handler in handlers:
        handler.setFormatter(ProgramFormatter(prog))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO if info_on_stdout else logging.WARNING)
