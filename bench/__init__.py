"""dfl-mesh benchmarks (layer 4): each figure printed beside a reference measured in the same run.

`python -m bench` runs the suite (transport, overhead, scale, compute, wire efficiency; GPU on
request) and the papers' reproductions live beside it. May import every layer below.
"""
