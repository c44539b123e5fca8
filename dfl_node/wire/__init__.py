"""The wire format: a message as a header and its tensors' bytes, in the compact form nodes send
each other (a few header bytes naming a layout defined once per connection) or the
self-describing msgpack form, and the message tags that address a message within a run's
schedule. The bottom of the runtime: every part that sends or counts a message speaks these
types.
"""
