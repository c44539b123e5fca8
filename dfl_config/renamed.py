"""Names that moved, kept for plugins written before: a module's `__getattr__` that resolves an
old name to the object it now names, with a DeprecationWarning at the plugin's own import line."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

Renamed = Mapping[str, tuple[str, Callable[[], Any]]]
"""Old name -> (the new name as a user writes it, e.g. `protocols.sdk.ProtocolNode`, and what
returns its object). A callable, not a module path, so the new home is imported on first use
by its own import statement, never by name."""


def renamed_names(module: str, renamed: Renamed,
                  otherwise: Callable[[str], Any] | None = None) -> Callable[[str], Any]:
    """`module`'s `__getattr__` for `renamed`; any other name goes to `otherwise`, the module's
    own `__getattr__` if it has one. Never cached in the module, so every import of an old name
    warns."""

    def __getattr__(name: str) -> Any:
        if name not in renamed:
            if otherwise is not None:
                return otherwise(name)
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new, load = renamed[name]
        warnings.warn(f"{module}.{name} is deprecated: use {new}", DeprecationWarning,
                      stacklevel=2)
        return load()

    return __getattr__
