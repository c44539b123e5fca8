"""DMFL-SQ (event-triggered, sparsified and quantised gossip with max-consensus on the
worst client) and CHOCO-SGD, which shares its compressed-copy machinery and bit accounting
(eqs. 18-20 of the DMFL-SQ paper).
"""
