"""Byzantine robustness as pure functions: the robust aggregation rules an honest node can mix
its neighbourhood with (`neighbourhood`, `aggregators`, `clipping`), and the attacks an
adversarial node can send or train with (`attacks`, `poisoning`).

Each function takes tensors and parameters and returns tensors, with no state, no randomness
but a `torch.Generator` it is given, and no order but the one of its arguments, so that every
process of a run computes the same bits (zmq = inproc). The rules are selectable in a run
through `aggregation_settings` (torch-free, read by the launcher) and the SDK's `robust_mix`;
the attacks are not wired into a run yet: docs/design/adversaries.md says how declaration,
the runtime, metrics and the reproduction will use them, and docs/protocols/robust.md states
each rule with its paper's equation.

May import `dfl_config` and torch; no protocol family, no runtime module.
"""
