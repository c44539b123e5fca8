"""The simulated network: the virtual clock of synchronous steps and TDMA frames, the
TDMA link schedule (conflict-graph colouring) and the radio link formulas.

What real sockets on one machine cannot show (latency, bandwidth, loss, airtime) is computed
here from the plan; it never delays a real message.
"""
