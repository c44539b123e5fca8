"""What a finished run directory becomes: plots, per-cycle metrics, and `dfl-report`'s
tables over seeds with their statistics.
"""
