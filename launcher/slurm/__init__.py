"""Running a mesh as a Slurm job, all of it: what a job asks for and its batch script
(`job.py`, the flags that set it in `resource_options.py`), the Slurm commands called
(`commands.py`), the backend that writes a job's plan (`backend.py`), queueing the job before
the plan exists (`queue.py`) and following it to its end (`submit.py`), a sweep's runs as jobs
(`sweep.py`), and inside the job one warm server per host (`host_server.py`) that forks the
nodes its tasks' clients (`task_client.py`) ask for.

May import `launcher.backends`, `launcher.config`, `launcher.run`, `launcher.sweep` and the
runtime. Nothing here imports torch before the job is queued (queue.py says why).
"""
