"""The runtime's configuration sections, as typed models (dfl_config.section.Section).

Each section's defaults are declared here once; the launcher composes them into the run's
config model and the nodes read the validated, complete values from the plan.
"""
