"""The wire format: one msgpack header frame plus one raw frame per tensor, and the
message tags that address a message within a run's schedule. The bottom of the runtime: every
part that sends or counts a message speaks these types.
"""
