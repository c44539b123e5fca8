"""DSC: multi-task learning per node with communication while aggregating over TDMA,
its baselines (no aggregation, FedAvg, max, FedAMP), the aggregation-depth analysis, and the
multi-task model, data (procedural scenes, NYU-v2), routing policies and dense-task metrics that
only DSC uses; and what the launcher knows of it, without torch: `specs`, which names its report
(`report_table`) and its `dfl-launch jstar` command.
"""
