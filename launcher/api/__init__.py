"""The Python API behind `dfl_mesh`: a run, a resumed run, a finished run loaded, as objects.

A script and a shell ask for a run the same way: both build a RunSpec (keywords here, options
there: launcher/config/run_spec.py), and the launcher takes only that, so they get the same
validation, defaults and errors. May import everything in the launcher; nothing in the
launcher but its CLIs and sweeps imports it.
"""
