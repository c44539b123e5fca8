"""Protocols made for directed and time-varying graphs (topologies/schedules.py): Stochastic
Gradient Push (Push-Sum SGD) and Epidemic Learning, which push to the round's out-neighbours
and combine what their in-neighbours pushed.
"""
