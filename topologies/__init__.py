"""Layer 0, topologies: the file format (`loader`, `writer`, `model`), seeded `generators`,
`mixing` weights, graph `measures` (SLEM, spectral gap, conductance), the `dfl-topology` CLI
(`cli`) and the shipped files (`make_shipped`, `*.yaml`).

Imports nothing of the project: every other layer stands on it.
"""
