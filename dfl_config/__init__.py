"""Typed configuration: the base every config section is declared with, one-line errors, and
the one base of every project exception (`errors.DflMeshError`, importing nothing, so that the
lightest command line can raise it).

The bottom layer: topology files, the runtime's sections, protocols' `hyper` and the launcher's
run config are all pydantic models built on `Section`, so a setting is validated in one way,
its default is declared once (in its model), and a mistake anywhere reads the same.
"""
