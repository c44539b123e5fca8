"""The classic baselines: D-PSGD and DSGT (gossip with mixing weights) and q-FFL (a
server-based fair aggregation), with their dense bit accounting.
"""
