"""The old module of the compressor settings, kept for compressor plugins written before their
classes became configs (protocols/toolkit/compressor_configs.py): `SparsifierSpec` and the other
old names still resolve, with a DeprecationWarning on every import."""

from __future__ import annotations

import warnings
from typing import Any

RENAMED = {"SparsifierSpec": "SparsifierConfig", "QuantizerSpec": "QuantizerConfig",
           "TopKSpec": "TopKConfig", "RandKSpec": "RandKConfig", "UniformSpec": "UniformConfig",
           "IdentitySpec": "IdentityConfig", "CompositeSpec": "CompositeConfig",
           "CompressorSpec": "CompressorConfig"}


def __getattr__(name: str) -> Any:
    if name not in RENAMED:
        raise AttributeError(f"module 'protocols.toolkit.compressor_specs' has no attribute "
                             f"{name!r}")
    new = RENAMED[name]
    warnings.warn(f"protocols.toolkit.compressor_specs.{name} is deprecated: use "
                  f"protocols.toolkit.compressor_configs.{new}", DeprecationWarning, stacklevel=2)
    from protocols.toolkit import compressor_configs

    return getattr(compressor_configs, new)
