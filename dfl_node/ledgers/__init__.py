"""Accounting: the traffic ledger (what each link carried per round, in bytes) and the
formula ledger (bits as a paper counts them), kept side by side.
"""
