"""Layer 3: turning a topology and a configuration into a finished run directory. The CLIs
(`dfl-launch`, `dfl-node`, `dfl-report`), configuration and plans, data preparation, backends
that start the mesh (a Slurm job's in `slurm`), the run's machinery, and results (summary,
report, plots).

May import every layer below. It knows no protocol by name: what it needs per protocol comes
from the registry.
"""
