"""Byzantine robustness as pure functions: the robust aggregation rules an honest node can mix
its neighbourhood with (`neighbourhood`, `aggregators`, `clipping`), and the attacks an
adversarial node can send or train with (`attacks`, `poisoning`).

Each function takes tensors and parameters and returns tensors, with no state, no randomness
but a `torch.Generator` it is given, and no order but the one of its arguments, so that every
process of a run computes the same bits (zmq = inproc). The rules are selectable in a run
through `aggregation_settings` (torch-free, read by the launcher) and the SDK's `robust_mix`.
Adversaries are declared with `adversary_settings` (torch-free: the launcher validates and
resolves them) and run by `adversary` (installed by protocols/node_base.py); what the honest
nodes achieved is measured by protocols/backdoor_probe.py and the launcher
(launcher/results/honest.py). docs/design/adversaries.md says how the reproduction will use
them, and docs/protocols/robust.md states each rule with its paper's equation.

The pure functions import `dfl_config` and torch only; `adversary`, which runs inside a node,
also the runtime's comm, seeds and data types. No protocol family.
"""
