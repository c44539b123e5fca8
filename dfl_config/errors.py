"""The one base of every exception dfl-mesh raises on purpose.

`except DflMeshError` catches whatever the project refuses or reports (bad input, a failed
run, a peer that timed out), and nothing Python or a library raised on its own. Each project
exception keeps its own built-in base as well (`PlanError` is still a `ValueError`,
`PeerTimeout` a `TimeoutError`), so callers that catch those still do. The project's
interruptions (`KeyboardInterrupt` and `SystemExit` subclasses) are not among them: an
`except Exception` must not catch a Ctrl-C. tests/test_exception_base.py walks every module.
"""

from __future__ import annotations


class DflMeshError(Exception):
    """Raised by dfl-mesh itself; every project exception derives from it."""
