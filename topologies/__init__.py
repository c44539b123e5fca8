"""Topologies: the file format (`loader`, `writer`, `model`), seeded `generators`, `mixing`
weights, the `dfl-topology` CLI (`cli`) and the shipped files (`make_shipped`, `*.yaml`)."""
