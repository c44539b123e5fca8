"""One GPU check of dfl-mesh, sized for a single short session on a lent machine.

    python -m bench.gpu --out DIR [--device cuda:0 | cpu] [--ring 20] [--models MLP,CNN]
                        [--mesh-reps 2] [--fmnist-root .devdata/fmnist] [--protocols P,...]
                        [--nodes 8] [--rounds 30] [--data-root .devdata/cifar10]
                        [--params 10000000] [--budget-s 500] [--skip STEP,...]

Why one script: device time is scarce and paid per start, so everything the project needs to
know from a GPU is measured in one run whose steps are known to work (`--device cpu` runs the
very same steps, smaller, on any machine), each step bounded by what is left of `--budget-s`,
and every result written to DIR as soon as it exists, so a step that fails or runs out of time
still leaves the others. The steps:

0. the device: without it (no CUDA here), one line on stderr and exit 77 (bench/cuda_check.py),
   before anything is measured or written.
1. environment: Python, torch, CUDA, cuDNN, pyzmq and libzmq versions, the device.
2. side_by_side: bench.round_cost's workload (D-PSGD adapt-then-combine, one SGD step of batch 8,
   IID Fashion-MNIST, one torch thread per node, evaluation only at the end) on a `--ring` ring
   with every node's model on the device, for each of `--models` and `--mesh-reps` strictly
   alternated repetitions: the bare pyzmq+torch mesh with pageable host buffers, the same with
   pinned ones (bench/device_mesh.py; CUDA only), and dfl-mesh (one process per node over
   ZeroMQ; its runtime has no pinned-buffer switch). Per system: steady seconds per round and
   CPU seconds per node-round, summarised as round_cost does, and dfl-mesh's round over each
   bare one. Needs Fashion-MNIST for dfl-mesh (`--fmnist-root`; the bare mesh trains on random
   data and runs without it). At most SIDE_BY_SIDE_SHARE of the budget.
3. protocols: zmq against inproc for each of `--protocols` (default: every registered one but
   those that bring their own datasets, which refuse the kit's synthetic data; listed) on
   the exactness kit's small mesh (dfl_mesh.testing: four nodes, three rounds, synthetic data)
   with every node on the device and `deterministic=true`: final files byte for byte and the
   formula ledger. At most PROTOCOLS_SHARE of the budget; the protocols left say so.
4. transfer: a `--params` float32 state on the device sent from one `Comm` to another over
   `ZmqTransport` (tcp loopback): device-to-host copy, encode, send, receive, decode,
   host-to-device copy, against the same path in raw torch + pyzmq (one `.to("cpu")`, a
   zero-copy send and receive, `torch.frombuffer(...).to(device)`). The figure is the ratio,
   both measured here and now; the parts (copies alone, loopback alone) say where time goes.
5. exactness on the device: DMFL-SQ on CIFAR-10 (protocols/configs/dmfl-sq-cifar10.yaml) on a
   `--nodes` ring whose every node is placed on `--device`, under `--transport zmq` (one
   process per node) and `--transport inproc` (one process), both with
   `hyper.deterministic=true` (dfl_node/learning/torch_settings.py: deterministic torch kernels
   and cuBLAS workspace). The `final/` files are compared byte for byte and the metrics record for
   record; wall seconds per round come from when every node's record of a round appeared. If they
   differ and time is left, zmq runs again to tell device nondeterminism from a transport
   difference.

Everything runs from the repository root with `python -m launcher.cli`, as an un-installed
checkout on PYTHONPATH would (no console scripts needed). Results: DIR/gpu.json (all of it,
rewritten after every result), DIR/gpu.txt (the summary printed at the end), DIR/runs/<name>/
(summary, metrics, node logs).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import yaml
import zmq

from bench.cuda_check import require
from bench.device_mesh import device_mesh
from bench.launch import ROOT, DataMissing, launch_command, require_data
from bench.round_cost import MODELS, QUICK_SIZES, options, steady
from dfl_mesh.testing import KIT_TOPOLOGY, assert_transports_agree
from dfl_node.comm.channel import Comm
from dfl_node.ledgers.traffic import Ledger
from dfl_node.transports.zeromq import ZmqTransport
from dfl_node.wire.codec import WireLimits
from dfl_node.wire.tags import Tag
from protocols.registry import PROTOCOLS

CONFIG = ROOT / "protocols" / "configs" / "dmfl-sq-cifar10.yaml"
LOOPBACK = "tcp://127.0.0.1:0"
MAX_MESSAGE = 1 << 30
POLL_S = 0.02
RESERVE_S = 5.0  # kept back from every step's limit for writing results
MIN_RUN_S = 15.0  # a launch given less could not even start its nodes
SIDE_BY_SIDE_SHARE = 0.45  # of --budget-s, at most
PROTOCOLS_SHARE = 0.3
FIRST_PROTOCOLS = ("d-psgd", "dmfl-sq", "choco-sgd", "dsgt", "qffl")  # first in the default order


class Budget:
    """Seconds left of the whole script's allowance; every step takes its limit from here."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic() - RESERVE_S)

    def share(self, fraction: float) -> Budget:
        """A step's own allowance: `fraction` of the whole, or what is left if less."""
        return Budget(min(self.left() + RESERVE_S, fraction * self.seconds))


class Results:
    """gpu.json, rewritten after every step so that a killed script still leaves its results."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.data: dict[str, Any] = {}

    def put(self, key: str, value: Any) -> None:
        self.data[key] = value
        (self.out / "gpu.json").write_text(json.dumps(self.data, indent=2, default=str) + "\n")


def environment(device: str) -> dict[str, Any]:
    """Versions and the device, so a figure can be tied to the machine that produced it."""
    env: dict[str, Any] = {
        "python": platform.python_version(), "torch": torch.__version__,
        "torch_cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "pyzmq": zmq.__version__, "libzmq": zmq.zmq_version(), "cpu_count": os.cpu_count(),
        "cuda_available": torch.cuda.is_available(), "device": device,
        "cuda_device_count": torch.cuda.device_count(),
    }
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        env.update(device_name=props.name, capability=f"{props.major}.{props.minor}",
                   device_memory_gib=round(props.total_memory / 2**30, 1))
        smi = shutil.which("nvidia-smi")
        if smi:
            query = [smi, "--query-gpu=driver_version,name,mig.mode.current,compute_mode",
                     "--format=csv,noheader"]
            try:
                done = subprocess.run(query, capture_output=True, text=True, timeout=20,
                                      check=False)
                env["nvidia_smi"] = done.stdout.strip() or done.stderr.strip()
            except (OSError, subprocess.SubprocessError) as exc:
                env["nvidia_smi"] = f"{type(exc).__name__}: {exc}"
    return env


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[int], None], reps: int, device: torch.device) -> list[float]:
    """Seconds of each of `reps` calls of `fn(i)` after two warm-up calls (allocator, sockets,
    pinned staging), with the device synchronised around each."""
    for i in range(2):
        fn(reps + i)
    times = []
    for i in range(reps):
        sync(device)
        start = time.perf_counter()
        fn(i)
        sync(device)
        times.append(time.perf_counter() - start)
    return times


def transfer(device: torch.device, params: int, reps: int) -> dict[str, Any]:
    """One-way time of a `params`-float32 state from device memory on one side to device memory
    on the other: through Comm + ZmqTransport, and through raw torch + pyzmq."""
    state = torch.randn(params, generator=torch.Generator().manual_seed(0)).to(device)
    limits = WireLimits(max_tensors=16, max_message_bytes=MAX_MESSAGE)
    a = ZmqTransport(0, LOOPBACK, {}, max_message_bytes=MAX_MESSAGE)
    b = ZmqTransport(1, LOOPBACK, {0: a.bound_address}, max_message_bytes=MAX_MESSAGE)
    a.add_peer(1, b.bound_address)
    sender = Comm(0, [1], a, limits, Ledger(0), recv_timeout_s=60.0)
    receiver = Comm(1, [0], b, limits, Ledger(1), recv_timeout_s=60.0)
    got: dict[str, torch.Tensor] = {}

    def via_comm(i: int) -> None:
        tag = Tag("data", 0, "xfer", step=i)
        sender.send(1, tag, {"w": state})
        got["w"] = receiver.recv(0, tag)["w"].to(device)

    ctx = zmq.Context()
    push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    pull.bind(LOOPBACK)
    push.connect(pull.getsockopt_string(zmq.LAST_ENDPOINT))

    def via_raw(_: int) -> None:
        host = state.to("cpu")
        push.send(host.numpy().data, copy=False)
        frame = pull.recv(copy=False)
        got["w"] = torch.frombuffer(frame.buffer, dtype=torch.float32).to(device)

    host_state = state.to("cpu")

    def loopback_only(_: int) -> None:
        push.send(host_state.numpy().data, copy=False)
        pull.recv(copy=False)

    def d2h(_: int) -> None:
        state.to("cpu")

    def h2d(_: int) -> None:
        host_state.to(device)

    try:
        comm_s = timed(via_comm, reps, device)
        comm_ok = torch.equal(got["w"], state)
        raw_s = timed(via_raw, reps, device)
        raw_ok = torch.equal(got["w"], state)
        parts = {name: statistics.median(timed(fn, reps, device))
                 for name, fn in (("d2h", d2h), ("h2d", h2d), ("zmq_loopback", loopback_only))}
    finally:
        # Comm.close is collective (a "bye" each way), so the two sides close concurrently.
        closer = threading.Thread(target=receiver.close)
        closer.start()
        sender.close()
        closer.join()
        push.close(linger=0)
        pull.close(linger=0)
        ctx.term()
    comm_med, raw_med = statistics.median(comm_s), statistics.median(raw_s)
    mbytes = params * 4 / 1e6
    return {"device": str(device), "params": params, "megabytes": mbytes, "reps": reps,
            "comm_s": comm_s, "raw_s": raw_s, "comm_median_s": comm_med,
            "raw_median_s": raw_med, "ratio_comm_over_raw": comm_med / raw_med,
            "comm_gb_per_s": mbytes / 1e3 / comm_med, "raw_gb_per_s": mbytes / 1e3 / raw_med,
            "parts_median_s": parts, "comm_bit_exact": comm_ok, "raw_bit_exact": raw_ok}


def ring_topology(path: Path, nodes: int, device: str) -> None:
    """A ring whose every node names `device`, as a user would place nodes on a GPU."""
    ids = ", ".join(f"{{id: {i}, device: '{device}'}}" for i in range(nodes))
    edges = ", ".join(f"[{i}, {(i + 1) % nodes}]" for i in range(nodes))
    path.write_text(f"nodes: [{ids}]\nedges: [{edges}]\n")


def run_options(topology: Path, data_root: Path, rounds: int) -> list[str]:
    """dfl-launch's options for the DMFL-SQ CIFAR-10 run on `topology`, deterministic kernels
    on (dfl_node/learning/torch_settings.py), every round evaluated so that rounds can be timed."""
    return ["--topology", str(topology), "--protocol", "dmfl-sq", "--config", str(CONFIG),
            "--data-root", str(data_root), "--rounds", str(rounds), "--eval-every", "1",
            "--set", "hyper.deterministic=true"]


def launcher_cmd(topology: Path, data_root: Path, rounds: int, transport: str,
                 run_dir: Path) -> list[str]:
    return launch_command([*run_options(topology, data_root, rounds), "--transport", transport],
                          run_dir)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """End the launcher and its nodes (its own session), SIGTERM first so it cleans up."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            return
        os.killpg(proc.pid, sig)
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue


def prepare_data(topology: Path, data_root: Path, work: Path, limit_s: float) -> dict[str, Any]:
    """Decode CIFAR-10 into the cache once (`dfl-launch plan` does it), so the timed runs below
    measure training, not JPEG decoding."""
    cmd = [sys.executable, "-m", "launcher.cli", "plan", *run_options(topology, data_root, 1),
           "-o", str(work / "plan.json")]
    start = time.monotonic()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=limit_s,
                          check=False)
    return {"seconds": time.monotonic() - start, "rc": done.returncode,
            "stderr": done.stderr[-2000:]}


def rounds_done(run_dir: Path, nodes: int) -> dict[int, int]:
    """round -> how many nodes reported it so far, for the rounds every node reported."""
    path = run_dir / "metrics.jsonl"
    counts: dict[int, int] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            r = json.loads(line)["round"]
            counts[r] = counts.get(r, 0) + 1
    return {r: c for r, c in counts.items() if c == nodes}


def mesh_run(name: str, cmd: list[str], run_dir: Path, nodes: int, rounds: int,
             limit_s: float) -> dict[str, Any]:
    """One launch, watched from outside: when every node's record of each round appeared."""
    start = time.monotonic()
    # stderr to a file, not a pipe: inproc nodes are threads of the launcher, and whatever
    # they warn must never fill a pipe nobody reads until the end.
    err_path = run_dir.parent / f"{name}.stderr"
    with err_path.open("w") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)
    round_at: dict[int, float] = {}
    timed_out = False
    while proc.poll() is None:
        for r in rounds_done(run_dir, nodes):
            round_at.setdefault(r, time.monotonic() - start)
        if time.monotonic() - start > limit_s:
            timed_out = True
            stop(proc)
            break
        time.sleep(POLL_S)
    stderr = err_path.read_text(errors="replace")
    wall = time.monotonic() - start
    for r in rounds_done(run_dir, nodes):
        round_at.setdefault(r, wall)
    out: dict[str, Any] = {"name": name, "rc": proc.returncode, "timed_out": timed_out,
                           "wall_s": wall, "rounds_seen": len(round_at),
                           "stderr": stderr[-2000:]}
    if round_at:
        first, last = min(round_at), max(round_at)
        out["first_round_done_s"] = round_at[first]
        if last > first:
            out["per_round_s"] = (round_at[last] - round_at[first]) / (last - first)
    summary = run_dir / "summary.json"
    if summary.exists():
        s = json.loads(summary.read_text())
        out.update(avg_accuracy=s.get("avg_accuracy"), worst_accuracy=s.get("worst_accuracy"),
                   summary_wall_seconds=s.get("wall_seconds"),
                   node_devices=sorted({n.get("device") for n in s.get("nodes", [])}))
    out["final_sha256"] = {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                           for p in sorted((run_dir / "final").glob("*.safetensors"))}
    return out


def metric_records(run_dir: Path) -> dict[tuple[int, int], dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return {(r["round"], r["node"]): r for r in map(json.loads, lines)}


def compare(a_dir: Path, b_dir: Path, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Byte equality of every final file and key-by-key equality of every metrics record
    (meaningful only when both runs finished: `both_finished` says so)."""
    fa, fb = a["final_sha256"], b["final_sha256"]
    files_differ = sorted(n for n in set(fa) | set(fb) if fa.get(n) != fb.get(n))
    ma, mb = metric_records(a_dir), metric_records(b_dir)
    keys_differ: dict[str, int] = {}
    for key in set(ma) & set(mb):
        for k in set(ma[key]) | set(mb[key]):
            if ma[key].get(k) != mb[key].get(k):
                keys_differ[k] = keys_differ.get(k, 0) + 1
    unmatched = len(set(ma) ^ set(mb))
    return {"both_finished": a["rc"] == 0 and b["rc"] == 0,
            "final_files": len(fa), "final_files_differ": files_differ,
            "final_equal": bool(fa) and not files_differ,
            "metric_records": [len(ma), len(mb)], "metric_records_unmatched": unmatched,
            "metric_keys_differ": keys_differ,
            "metrics_equal": bool(ma) and not keys_differ and not unmatched}


def copy_run(run_dir: Path, dest: Path) -> None:
    """The small files of a run (the model files stay behind: their hashes are in gpu.json)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("summary.json", "metrics.jsonl", "config.yaml"):
        if (run_dir / name).exists():
            shutil.copy(run_dir / name, dest / name)
    if (run_dir / "logs").is_dir():
        shutil.copytree(run_dir / "logs", dest / "logs", dirs_exist_ok=True)


def exactness(args: argparse.Namespace, work: Path, budget: Budget,
              results: Results) -> None:
    topology = work / f"ring{args.nodes}.yaml"
    ring_topology(topology, args.nodes, args.device)
    results.put("data", prepare_data(topology, args.data_root, work, budget.left()))
    runs: dict[str, dict[str, Any]] = {}
    for name, transport in (("zmq", "zmq"), ("inproc", "inproc")):
        if budget.left() < MIN_RUN_S:
            results.put(f"skipped_{name}", f"{budget.left():.0f} s left of --budget-s")
            return
        run_dir = work / name
        cmd = launcher_cmd(topology, args.data_root, args.rounds, transport, run_dir)
        runs[name] = mesh_run(name, cmd, run_dir, args.nodes, args.rounds, budget.left())
        copy_run(run_dir, args.out / "runs" / name)
        results.put("runs", runs)
    same = compare(work / "zmq", work / "inproc", runs["zmq"], runs["inproc"])
    results.put("zmq_vs_inproc", same)
    first = runs["zmq"]
    needed = first.get("wall_s", 0.0) * 1.3
    if not (same["final_equal"] and same["metrics_equal"]) and budget.left() > needed:
        run_dir = work / "zmq-again"
        cmd = launcher_cmd(topology, args.data_root, args.rounds, "zmq", run_dir)
        runs["zmq-again"] = mesh_run("zmq-again", cmd, run_dir, args.nodes, args.rounds,
                                     budget.left())
        copy_run(run_dir, args.out / "runs" / "zmq-again")
        results.put("runs", runs)
        results.put("zmq_vs_zmq_again", compare(work / "zmq", run_dir, first,
                                                runs["zmq-again"]))


def side_by_side(args: argparse.Namespace, work: Path, budget: Budget,
                 results: Results) -> None:
    """Round cost's workload on the device: the bare mesh (pageable, and pinned on CUDA) and
    dfl-mesh, strictly alternated, each run written to the results as it ends."""
    ring = work / f"ring{args.ring}-device.yaml"
    ring_topology(ring, args.ring, args.device)
    samples: dict[str, dict[str, list[dict[str, Any]]]] = {m: {} for m in args.models}
    out: dict[str, Any] = {"nodes": args.ring, "samples": samples, "summary": {}}
    systems: list[tuple[str, bool | None]] = [("bare", False)]  # name, pinned (None: dfl-mesh)
    if torch.device(args.device).type == "cuda":
        systems.append(("bare pinned", True))
    try:
        require_data("fmnist", args.fmnist_root)
        systems.append(("dfl-mesh", None))
    except DataMissing as exc:
        out["dfl-mesh skipped"] = str(exc)
    for rep in range(args.mesh_reps):
        for model in args.models:
            rounds = args.mesh_rounds or QUICK_SIZES.rounds[model]
            for name, pinned in systems:
                if budget.left() < MIN_RUN_S:
                    out["stopped"] = f"--budget-s: {budget.left():.0f} s left at {model} {name}"
                    results.put("side_by_side", out)
                    return
                row = (dfl_mesh_round(args, ring, model, rounds, work / f"dfl-{model}-{rep}",
                                      budget.left()) if pinned is None
                       else bare_round(args, model, rounds, pinned, budget.left()))
                samples[model].setdefault(name, []).append(row)
                out["summary"] = side_by_side_summary(samples)
                results.put("side_by_side", out)


def bare_round(args: argparse.Namespace, model: str, rounds: int, pinned: bool,
               limit_s: float) -> dict[str, Any]:
    """One run of the bare mesh on the device: its steady round and CPU per node-round, or
    why there are none (the other systems still run)."""
    try:
        seconds, cpu = device_mesh(MODELS[model], args.ring, rounds, args.device, pinned,
                                   limit_s)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[-1500:]}"}
    return {"round_s": seconds, "cpu_ms": cpu * 1e3}


def dfl_mesh_round(args: argparse.Namespace, ring: Path, model: str, rounds: int,
                   run_dir: Path, limit_s: float) -> dict[str, Any]:
    """One dfl-mesh run of round_cost's options on the device ring: its steady round and CPU
    per node-round from its own summary (round_cost's figures), or why there are none."""
    opts = [*options(model, ring, rounds),
            *(["--data-root", str(args.fmnist_root)] if args.fmnist_root else [])]
    run = mesh_run(run_dir.name, launch_command(opts, run_dir), run_dir, args.ring, rounds,
                   limit_s)
    summary = run_dir / "summary.json"
    if run["rc"] != 0 or not summary.exists():
        return {"error": f"rc {run['rc']}{' (timed out)' if run['timed_out'] else ''}: "
                         f"{run['stderr'][-1500:]}"}
    s = json.loads(summary.read_text())
    return {"round_s": steady(s["round_seconds"]), "cpu_ms": steady(s["round_cpu_seconds"]) * 1e3,
            "wall_s": run["wall_s"], "node_devices": run.get("node_devices")}


def side_by_side_summary(samples: dict[str, dict[str, list[dict[str, Any]]]],
                         ) -> dict[str, dict[str, Any]]:
    """Per model and system the median round and CPU per node-round over the measured
    repetitions, and dfl-mesh's over each bare mesh's."""
    out: dict[str, dict[str, Any]] = {}
    for model, systems in samples.items():
        medians = {}
        for name, rows in systems.items():
            ok = [r for r in rows if "round_s" in r]
            if ok:
                medians[name] = {"round_s": statistics.median(r["round_s"] for r in ok),
                                 "cpu_ms": statistics.median(r["cpu_ms"] for r in ok),
                                 "runs": len(ok)}
        dfl = medians.get("dfl-mesh")
        for name in ("bare", "bare pinned"):
            if dfl and name in medians:
                medians[f"dfl-mesh / {name}"] = {
                    "round": dfl["round_s"] / medians[name]["round_s"],
                    "cpu_ms_more": dfl["cpu_ms"] - medians[name]["cpu_ms"]}
        out[model] = medians
    return out


def device_kit_topology(path: Path, device: str) -> Path:
    """The exactness kit's four-node mesh with every node on `device`."""
    topology = yaml.safe_load(KIT_TOPOLOGY)
    for node in topology["nodes"]:
        node["device"] = device
    path.write_text(yaml.safe_dump(topology))
    return path


def protocol_order(names: list[str]) -> list[str]:
    """FIRST_PROTOCOLS first (the gossip family, cheapest), then the rest by name."""
    first = [p for p in FIRST_PROTOCOLS if p in names]
    return first + sorted(p for p in names if p not in first)


def kit_protocols() -> tuple[list[str], dict[str, str]]:
    """The registered protocols the kit's mesh (synthetic data) fits, in protocol_order, and
    why each other one is left out: a protocol that brings its own datasets (the DSC family's
    multi-task scenes, whose nodes need positions and tasks) refuses synthetic data."""
    left_out = {name: f"brings its own datasets ({', '.join(PROTOCOLS[name].datasets)}); the "
                      "kit's synthetic mesh does not fit it (--protocols NAME tries anyway)"
                for name in PROTOCOLS if PROTOCOLS[name].datasets}
    return protocol_order([p for p in PROTOCOLS if p not in left_out]), left_out


def protocols_exactness(args: argparse.Namespace, work: Path, budget: Budget,
                        results: Results) -> None:
    """zmq against inproc on the device for each protocol, in the kit's words (the first
    difference, or why a run failed), written as each protocol ends."""
    topology = device_kit_topology(work / "kit-device.yaml", args.device)
    found: dict[str, Any] = {name: f"not checked: {why}"
                             for name, why in args.protocols_left_out.items()}
    for protocol in args.protocols:
        if budget.left() < MIN_RUN_S:
            found[protocol] = f"skipped: --budget-s, {budget.left():.0f} s left"
            continue
        began = time.monotonic()
        try:
            assert_transports_agree(protocol, topology=topology, workdir=work / "kit" / protocol,
                                    deterministic=True)
            outcome = "equal"
        except AssertionError as exc:
            outcome = f"differ or failed: {str(exc)[:1500]}"
        except Exception as exc:
            outcome = f"error: {type(exc).__name__}: {str(exc)[:1500]}"
        found[protocol] = {"outcome": outcome, "seconds": round(time.monotonic() - began, 1)}
        results.put("protocols", found)
    results.put("protocols", found)


def side_by_side_lines(found: dict[str, Any] | None) -> list[str]:
    """One line per model and system: its round and CPU, and dfl-mesh's ratios."""
    if not found:
        return []
    lines = []
    for model, medians in found["summary"].items():
        for name, m in medians.items():
            if "round_s" in m:
                lines.append(f"{model} ring{found['nodes']} {name}: {m['round_s'] * 1e3:.1f} ms "
                             f"per round, {m['cpu_ms']:.2f} ms CPU per node-round "
                             f"({m['runs']} runs)")
            else:
                lines.append(f"{model} ring{found['nodes']} {name}: round {m['round']:.2f}x, "
                             f"{m['cpu_ms_more']:+.2f} ms CPU per node-round")
    for model, systems in found["samples"].items():
        for name, rows in systems.items():
            lines += [f"{model} {name}: {row['error'].strip().splitlines()[-1]}"
                      for row in rows if "error" in row and row["error"].strip()]
    lines += [f"side_by_side: {key}: {found[key]}" for key in ("dfl-mesh skipped", "stopped")
              if key in found]
    return lines


def summary_text(data: dict[str, Any]) -> str:
    """The lines a reader needs, from gpu.json's data."""
    env = data.get("environment", {})
    lines = [f"torch {env.get('torch')} (CUDA {env.get('torch_cuda')}, cuDNN "
             f"{env.get('cudnn')}), pyzmq {env.get('pyzmq')} / libzmq {env.get('libzmq')}, "
             f"python {env.get('python')}",
             f"device {env.get('device')}: {env.get('device_name', 'cpu')} "
             f"{env.get('nvidia_smi', '')}".rstrip()]
    lines += side_by_side_lines(data.get("side_by_side"))
    for protocol, found in data.get("protocols", {}).items():
        lines.append(f"{protocol}: zmq vs inproc on the device: "
                     + (f"{found['outcome']} ({found['seconds']:.0f} s)"
                        if isinstance(found, dict) else found))
    xfer = data.get("transfer")
    if isinstance(xfer, dict) and "ratio_comm_over_raw" in xfer:
        parts = xfer["parts_median_s"]
        lines.append(
            f"transfer {xfer['params']:,} float32 ({xfer['megabytes']:.0f} MB) {xfer['device']}"
            f" -> {xfer['device']}: Comm+ZmqTransport {xfer['comm_median_s'] * 1e3:.1f} ms, raw"
            f" torch+pyzmq {xfer['raw_median_s'] * 1e3:.1f} ms, ratio "
            f"{xfer['ratio_comm_over_raw']:.2f} (bit-exact {xfer['comm_bit_exact']}); parts: "
            f"d2h {parts['d2h'] * 1e3:.1f} ms, h2d {parts['h2d'] * 1e3:.1f} ms, zmq loopback "
            f"{parts['zmq_loopback'] * 1e3:.1f} ms")
    elif xfer is not None:
        lines.append(f"transfer: {xfer}")
    prep = data.get("data")
    if prep:
        lines.append(f"data prepared in {prep['seconds']:.1f} s (rc {prep['rc']})")
    for name, run in data.get("runs", {}).items():
        per_round = run.get("per_round_s")
        lines.append(
            f"{name}: rc {run['rc']}{' TIMED OUT' if run['timed_out'] else ''}, "
            f"{run['rounds_seen']} rounds seen, wall {run['wall_s']:.1f} s, first round done "
            f"at {run.get('first_round_done_s', float('nan')):.1f} s, "
            f"{(per_round or float('nan')) * 1e3:.0f} ms/round, avg acc "
            f"{run.get('avg_accuracy')}, devices {run.get('node_devices')}")
        if run["rc"] not in (0, None) and run["stderr"]:
            lines.append(f"  stderr: {run['stderr'].strip().splitlines()[-1]}")
    for key in ("zmq_vs_inproc", "zmq_vs_zmq_again"):
        same = data.get(key)
        if same:
            lines.append(f"{key}: both finished {same['both_finished']}, "
                         f"final files equal {same['final_equal']} "
                         f"({same['final_files']} files, differ: {same['final_files_differ']}),"
                         f" metrics equal {same['metrics_equal']} "
                         f"(records {same['metric_records']}, unmatched "
                         f"{same['metric_records_unmatched']}, keys differing: "
                         f"{same['metric_keys_differ']})")
    for key in ("skipped_zmq", "skipped_inproc", *(f"error_{name}" for name in STEPS)):
        if key in data:
            lines.append(f"{key}: {data[key]}")
    return "\n".join(lines)


STEPS = ("side_by_side", "protocols", "runs", "transfer")  # in the order they run


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The options, with the sizes --device cpu shrinks (the same steps, in seconds)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--ring", type=int, default=None,
                        help="side_by_side: ring size (20; cpu: 3)")
    parser.add_argument("--models", default=None,
                        help=f"side_by_side: comma list of {', '.join(MODELS)} (all; cpu: MLP)")
    parser.add_argument("--mesh-rounds", type=int, default=None,
                        help="side_by_side: rounds per run (round_cost's quick sizes: "
                             f"{QUICK_SIZES.rounds}; cpu: 3)")
    parser.add_argument("--mesh-reps", type=int, default=None,
                        help="side_by_side: alternated repetitions (2; cpu: 1)")
    parser.add_argument("--fmnist-root", type=Path, default=None,
                        help="side_by_side: Fashion-MNIST for dfl-mesh, as dfl-launch "
                             "--data-root (default .devdata/fmnist if it exists, else the "
                             "launcher's own places)")
    parser.add_argument("--protocols", default=None,
                        help="protocols: comma list (every registered one the kit's mesh "
                             "fits; cpu: d-psgd)")
    parser.add_argument("--nodes", type=int, default=None, help="runs: ring size (8; cpu: 4)")
    parser.add_argument("--rounds", type=int, default=None, help="runs: rounds (30; cpu: 4)")
    parser.add_argument("--params", type=int, default=None,
                        help="transfer: state size (10,000,000; cpu: 2,000,000)")
    parser.add_argument("--reps", type=int, default=10, help="transfer: repetitions")
    parser.add_argument("--data-root", type=Path, default=ROOT / ".devdata" / "cifar10",
                        help="runs: CIFAR-10")
    parser.add_argument("--work", type=Path, default=None,
                        help="run directories (default: a fresh temp directory)")
    parser.add_argument("--budget-s", type=float, default=500.0)
    parser.add_argument("--skip", default="",
                        help=f"comma list of steps to skip: {','.join(STEPS)}")
    args = parser.parse_args(argv)
    unknown = sorted(set(filter(None, args.skip.split(","))) - set(STEPS))
    models = args.models.split(",") if args.models else None
    if unknown or (models and set(models) - set(MODELS)):
        parser.error(f"unknown step(s) {unknown} or model(s) {models}")
    cpu = args.device == "cpu"
    args.ring = args.ring or (3 if cpu else 20)
    args.models = models or (["MLP"] if cpu else list(MODELS))
    args.mesh_rounds = args.mesh_rounds or (3 if cpu else None)
    args.mesh_reps = args.mesh_reps or (1 if cpu else 2)
    default_fmnist = ROOT / ".devdata" / "fmnist"
    args.fmnist_root = (args.fmnist_root or (default_fmnist if default_fmnist.exists()
                                             else None))
    if args.fmnist_root is not None:
        args.fmnist_root = args.fmnist_root.absolute()
    fitting, left_out = kit_protocols()
    args.protocols = (args.protocols.split(",") if args.protocols
                      else ["d-psgd"] if cpu else fitting)
    args.protocols_left_out = {} if cpu or args.protocols != fitting else left_out
    args.nodes = args.nodes or (4 if cpu else 8)
    args.rounds = args.rounds or (4 if cpu else 30)
    args.params = args.params or (2_000_000 if cpu else 10_000_000)
    args.data_root = args.data_root.absolute()
    args.skip = set(filter(None, args.skip.split(",")))
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    require(args.device, "python -m bench.gpu")
    budget = Budget(args.budget_s)
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(os.environ.get("TMPDIR", "/tmp")) / f"dfl-gpu-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("DFL_MESH_CACHE", str(work / "cache"))
    # The launches below import this checkout, installed or not (the launcher's forkserver
    # and its nodes inherit the variable).
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *paths])
    results = Results(args.out)
    results.put("args", {k: str(v) for k, v in vars(args).items()})
    results.put("environment", environment(args.device))
    steps: dict[str, Callable[[], None]] = {
        "side_by_side": lambda: side_by_side(args, work, budget.share(SIDE_BY_SIDE_SHARE),
                                             results),
        "protocols": lambda: protocols_exactness(args, work, budget.share(PROTOCOLS_SHARE),
                                                 results),
        "runs": lambda: exactness(args, work, budget, results),
        "transfer": lambda: results.put("transfer", transfer(torch.device(args.device),
                                                             args.params, args.reps)),
    }
    for name in STEPS:
        if name in args.skip:
            continue
        try:
            steps[name]()
        except Exception as exc:  # the other steps still run; the reason is in the results
            results.put(f"error_{name}", f"{type(exc).__name__}: {exc}")
        print(f"bench.gpu: {name} done, {budget.left():.0f} s of the budget left",
              file=sys.stderr, flush=True)
    results.put("budget_left_s", budget.left())
    text = summary_text(results.data)
    (args.out / "gpu.txt").write_text(text + "\n")
    print(text, flush=True)


if __name__ == "__main__":
    main()
