"""Layer 0, topologies: the file format (`loader`, `writer`, `model`), seeded `generators`,
`mixing` weights, graph `measures` (SLEM, spectral gap, conductance), the `dfl-topology` CLI
(`cli`) and the shipped files (`make_shipped`, `*.yaml`).

May import `dfl_config` only (the typed-config base and one-line errors): every layer above
stands on it.
"""
