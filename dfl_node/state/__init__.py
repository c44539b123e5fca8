"""Checkpoint files (one node's state after a round, pickle-free, atomic) and the codec
that turns the runtime's stateful objects into checkpoint state and back.
"""
