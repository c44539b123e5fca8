"""The old module of the compressor settings, kept for compressor plugins written before their
classes became configs (protocols/toolkit/compressor_configs.py): `SparsifierSpec` and the other
old names still resolve, with a DeprecationWarning on every import."""

from __future__ import annotations

from functools import partial

from dfl_config.renamed import renamed_names
from protocols.toolkit import compressor_configs

RENAMED = {"SparsifierSpec": "SparsifierConfig", "QuantizerSpec": "QuantizerConfig",
           "TopKSpec": "TopKConfig", "RandKSpec": "RandKConfig", "UniformSpec": "UniformConfig",
           "IdentitySpec": "IdentityConfig", "CompositeSpec": "CompositeConfig",
           "CompressorSpec": "CompressorConfig"}

__getattr__ = renamed_names(__name__, {
    old: (f"protocols.toolkit.compressor_configs.{new}", partial(getattr, compressor_configs, new))
    for old, new in RENAMED.items()})
