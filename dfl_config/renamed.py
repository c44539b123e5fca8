"""Names that moved, kept for plugins written before: a module's `__getattr__` that resolves an
old name to its new home, with a DeprecationWarning at the plugin's own import line."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def renamed_names(module: str, renamed: Mapping[str, tuple[str, str]],
                  otherwise: Callable[[str], Any] | None = None) -> Callable[[str], Any]:
    """`module`'s `__getattr__` for `renamed`: old name -> (module that holds it now, new name);
    any other name goes to `otherwise`, the module's own `__getattr__` if it has one. The new
    home is imported on first use, so the old name costs nothing until asked for."""

    def __getattr__(name: str) -> Any:
        if name not in renamed:
            if otherwise is not None:
                return otherwise(name)
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        home, new = renamed[name]
        warnings.warn(f"{module}.{name} is deprecated: use {home}.{new}", DeprecationWarning,
                      stacklevel=2)
        return getattr(importlib.import_module(home), new)

    return __getattr__
