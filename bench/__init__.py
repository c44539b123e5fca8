"""dfl-mesh benchmarks: each figure printed beside a reference measured in the same run."""
