#!/usr/bin/env bash
# bench/gpu.py on a lent GPU machine, from an un-installed checkout (see its docstring).
#
#   bash bench/gpu.sh [options of bench/gpu.py]     (OUT=DIR, default ./gpu-out; LIMIT_S=540;
#                                                     PY: .venv/bin/python if any, else python3)
#
# Without a CUDA device (or with --device naming one that is not there) it prints one line on
# stderr, "bench/gpu.sh: no CUDA device here (...): nothing measured", and exits 77, the code
# test harnesses read as skipped (bench/cuda_check.py), before it installs or writes anything.
# `--device cpu` runs the same steps, smaller, on any machine.
#
# What it needs beside the checkout, ignored by git (so a lent machine gets them only when they
# are carried): .whl/ (pyzmq, pydantic and their needs, where the machine lacks them),
# .devdata/fmnist/ (the four Fashion-MNIST *-ubyte.gz files, for dfl-mesh's side of the
# side-by-side) and .devdata/cifar10/ (the CIFAR-10 archive, for the DMFL-SQ exactness runs).
# Each step is bounded by bench/gpu.py's --budget-s (500) and the whole by LIMIT_S, so that one
# command of at most 10 minutes measures everything, writing $OUT/gpu.json as it goes.
#
# Why a wrapper: the machine has torch but not pyzmq, and the checkout is not pip-installed.
# So pyzmq is installed from the wheel(s) carried in .whl/ into /tmp/site (no index, nothing
# else touched) when it is missing, the checkout goes on PYTHONPATH (the launcher's forkserver
# and its node processes inherit it), and the whole script is bounded by `timeout` so that a
# hang still leaves the results written so far in $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
OUT=${OUT:-gpu-out}
device=cuda:0
previous=
for arg in "$@"; do
    case "$previous" in --device) device=$arg ;; esac
    case "$arg" in --device=*) device=${arg#--device=} ;; esac
    previous=$arg
done
"$PY" -m bench.cuda_check "$device"  # one line and exit 77 without the device
if ! "$PY" -c "import zmq" 2>/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
# The protocols, models and datasets are found by their entry points, which only an installed
# distribution declares: the checkout's own metadata (name, version, entry points, from
# pyproject.toml) is written to /tmp/site, with nothing built or installed; the modules are still
# imported from the checkout, first on PYTHONPATH.
if ! "$PY" -c "import importlib.metadata as m; m.distribution('dfl-mesh')" 2>/dev/null; then
    "$PY" - <<'EOF'
import pathlib, tomllib
project = tomllib.loads(pathlib.Path("pyproject.toml").read_text())["project"]
info = pathlib.Path("/tmp/site") / f"dfl_mesh-{project['version']}.dist-info"
info.mkdir(parents=True, exist_ok=True)
(info / "METADATA").write_text(
    f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
(info / "entry_points.txt").write_text("".join(
    f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items()) + "\n"
    for group, points in project["entry-points"].items()))
EOF
    case ":${PYTHONPATH:-}:" in *:/tmp/site:*) ;; *) export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}" ;; esac
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi -L 2>/dev/null || true
exec timeout -k 10 "${LIMIT_S:-540}" "$PY" -m bench.gpu --out "$OUT" "$@"
