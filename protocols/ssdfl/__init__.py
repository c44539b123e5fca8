"""SSD-FL (semi-decentralised FL with conductance-based clusters formed in a one-time
pre-phase) and its baselines SDFL, PDFL, STC and CSTC, with the optimisers, heterogeneity
measures and STC sampling they use.
"""
