"""What ends a run that no node is to blame for, each as a Cause (launcher/run/outcome.py).

- The run directory's storage: a write that fails with ENOSPC (or EDQUOT), EROFS, EACCES or
  EPERM, in the launcher (metrics.jsonl, summary.json, ...) or in a node (a checkpoint, its
  final model). A node reports its own as fields of its error record (`io_fields`), so the
  launcher blames the disk, not the node that happened to write first.
- A signal to the launcher (launcher/stop_signals.py).
- The death of the zygote that forks the nodes (launcher/backends/zygote.py): its nodes are
  orphans then, alive, and naming one of them would be false.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from pathlib import Path
from typing import Any

from launcher import stop_signals
from launcher.run.outcome import Cause, Outcome

STORAGE = {errno.ENOSPC: ("disk_full", "disk full"),
           errno.EDQUOT: ("disk_full", "disk quota exceeded"),
           errno.EROFS: ("read_only", "read-only file system"),
           errno.EACCES: ("permission_denied", "permission denied"),
           errno.EPERM: ("permission_denied", "operation not permitted")}
STORAGE_KINDS = frozenset(kind for kind, _ in STORAGE.values()) | {"io_error"}


def io_fields(exc: BaseException) -> dict[str, Any]:
    """A node's error record's account of a storage fault (errno name, and the file when the
    error names one); {} for any other error."""
    if not isinstance(exc, OSError) or exc.errno not in STORAGE:
        return {}
    return {"errno": errno.errorcode[exc.errno],
            **({"path": os.fsdecode(exc.filename)} if exc.filename else {})}


def storage_cause(name: str, path: str | None, who: str, run_dir: Path) -> Cause:
    """`name` (an errno name: ENOSPC) met by `who` ("node 3", "dfl-launch") writing `path`."""
    code = getattr(errno, name, 0)
    kind, what = STORAGE.get(code, ("io_error", os.strerror(code) if code else name))
    shown = path
    if path is not None and Path(path).is_relative_to(run_dir):
        shown = str(Path(path).relative_to(run_dir))
    wrote = f"could not write {shown}" if shown else "could not write in the run directory"
    return Cause(kind, f"{what} ({name}): {who} {wrote}",
                 {"errno": name, "by": who, **({"path": shown} if shown else {})})


def storage_failure(cause: Cause) -> Outcome:
    return Outcome(False, reason=cause.message, failed_at=time.time(), cause=cause)


def node_storage_failure(faults: dict[int, dict[str, str]], run_dir: Path) -> Outcome | None:
    """The run's failure when nodes reported storage faults (`io_fields`, by node): the first
    node's, blamed on the storage; None when none did."""
    if not faults:
        return None
    node = min(faults)
    return storage_failure(storage_cause(faults[node]["errno"], faults[node].get("path"),
                                         f"node {node}", run_dir))


def errno_name(exc: OSError) -> str:
    """ENOSPC for a full disk's error (the exception's class name if it has no errno)."""
    return errno.errorcode.get(exc.errno or 0, type(exc).__name__)


def launcher_storage_cause(exc: OSError, path: Path, run_dir: Path) -> Cause:
    """The launcher's own write of `path` failed with `exc`."""
    return storage_cause(errno_name(exc), str(exc.filename or path), "dfl-launch", run_dir)


def interrupted(exc: KeyboardInterrupt) -> Outcome:
    """The outcome of a run stopped by Ctrl-C, SIGTERM or SIGHUP (`exc`)."""
    sig = stop_signals.signal_of(exc)
    return Outcome(False, reason="interrupted",
                   cause=Cause("signal", stop_signals.describe(sig), {"signal": sig.name}))


def exit_code_of(outcome: Outcome) -> int | None:
    """The exit code of an interrupted run (by its signal); None for any other."""
    if outcome.status != "interrupted":
        return None
    name = outcome.cause.detail.get("signal") if outcome.cause else None
    return stop_signals.exit_code(signal.Signals[name] if name else signal.SIGINT)


def zygote_died(pid: int, how: str) -> Outcome:
    """The zygote (pid `pid`) died `how` (an exit description) while its nodes ran."""
    cause = Cause("zygote_died", f"the zygote (pid {pid}), which forks the nodes, died ({how})",
                  {"pid": pid, "exit": how})
    return Outcome(False, reason=cause.message, failed_at=time.time(), cause=cause)
