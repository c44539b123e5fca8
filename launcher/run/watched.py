"""Whether a person watches a run: a terminal, or a Jupyter kernel. Apart from the progress
display that asks it (launcher/run/progress.py), so that `dfl_mesh.run` and a sweep, which ask
it before their checks, refuse bad input without that display's modules (issue 45)."""

from __future__ import annotations

import builtins
import sys


def in_notebook() -> bool:
    """A Jupyter kernel: its stdout is no terminal, yet a person watches (rich draws a widget)."""
    if not hasattr(builtins, "get_ipython"):  # no IPython, no kernel: rich's answer, unimported
        return False
    from rich.console import Console

    return Console().is_jupyter


def interactive() -> bool:
    """Whether a person watches: a terminal, or a Jupyter kernel (whose stdout is no tty)."""
    return sys.stdout.isatty() or in_notebook()
