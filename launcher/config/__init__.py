"""From what the user asked to a RunPlan: the layered configuration, options, input
resolution, checks that make bad input exit 2 before anything starts, devices, keys, endpoints
and local port claims; the catalog of backends (names, default, what each supports).
"""
