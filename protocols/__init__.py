"""Layer 2: the algorithms. `declaration.ProtocolDeclaration` is what a protocol declares for the
launcher (no torch), `node_base.ProtocolNode` the node class it implements, `sdk` the building
blocks of a round and the one door to the runtime, `describe` the types of what it shows (report
table, score, plots, commands, datasets), `registry` maps CLI names to specs and node classes and is
the launcher's way in (besides the types of `describe` and `hyper`), `toolkit` holds building blocks
(compressors, public copies, event triggers, max-consensus), and each family of a paper is one
sub-package.

May import `dfl_node`, `topologies` and `dfl_config`. No family imports a sibling family
(import-linter).
"""
