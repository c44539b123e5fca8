"""Algorithm building blocks that protocols compose: compressors C(v), their typed `compressor:`
specs (a plugin point: entry-point groups `dfl_mesh.sparsifiers`, `dfl_mesh.quantizers`) and
their position coding, public model copies, event triggers and scalar max-consensus.

May import `topologies`, `dfl_config` and the protocol SDK (the runtime only through it);
never a protocol family.
"""
