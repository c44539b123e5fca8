"""The Python API behind `dfl_mesh`: a run, a resumed run, a finished run loaded, as objects.

`dfl-launch` is a thin wrapper over the same functions: settings are parsed by the very click
options the command line has, so a script and a shell get the same validation, defaults and
errors. May import everything in the launcher; nothing in the launcher but its CLIs imports it.
"""
