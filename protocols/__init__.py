"""Layer 2: the algorithms. `base.Protocol` is the SDK a protocol implements, `describe` the
types of what it declares for the launcher (report table, score, plots, commands, datasets),
`registry` maps CLI names to classes and is the launcher's only way in, `toolkit` holds
building blocks (compressors, public copies, event triggers, max-consensus), and each family
of a paper is one sub-package.

May import `dfl_node` and `topologies`. No family imports a sibling family (import-linter).
"""
