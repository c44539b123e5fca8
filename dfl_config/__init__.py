"""Typed configuration: the base every config section is declared with, and one-line errors.

The bottom layer: topology files, the runtime's sections, protocols' `hyper` and the launcher's
run config are all pydantic models built on `Section`, so a setting is validated in one way,
its default is declared once (in its model), and a mistake anywhere reads the same.
"""
