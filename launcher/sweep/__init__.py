"""Sweeps: a grid of runs (variants x topologies x config values x seeds) from one file, run to
completion across interruptions, ending with the `dfl-report` tables of all of them.

`spec` is the file's typed model, `grid` the runs it stands for (each with its directory),
`runner` runs what is not finished yet under one progress bar. Imports the API, never a backend.
"""
