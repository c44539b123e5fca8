"""Data preparation, once per run before any node starts: find a real dataset, decode it
into the prepared-data cache that nodes open read-only.
"""
