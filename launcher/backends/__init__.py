"""How a mesh is started: one OS process per node over ZeroMQ (processes.py), one thread per
node over in-process queues (threads.py), a docker-compose file (compose.py), or hosts started
by hand (hosts.py). base.py is the Backend interface, registry.py the local backends by their
`--transport` name; what each backend is and supports is in launcher/config/backend_catalog.py,
which configuration reads before anything runs.

May import `launcher.config`, `launcher.run`, `launcher.results` (per-cycle metrics),
`launcher.node_cli` (what a forked node runs), the protocols' registry and the layers below.
A Slurm job is started from launcher/slurm/, above this package.
"""
