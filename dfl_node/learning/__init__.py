"""Learning on one node: model builders, local training and evaluation, datasets,
the prepared-data cache, partitions, shards, seeded random streams, flat parameter vectors and
process-wide torch settings. Knows nothing of communication.
"""
