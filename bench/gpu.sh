#!/usr/bin/env bash
# bench/gpu.py on a lent GPU machine, from an un-installed checkout (see its docstring).
#
#   bash bench/gpu.sh [options of bench/gpu.py]     (OUT=DIR, default ./gpu-out)
#
# Why a wrapper: the machine has torch but not pyzmq, and the checkout is not pip-installed.
# So pyzmq is installed from the wheel(s) carried in .whl/ into /tmp/site (no index, nothing
# else touched) when it is missing, the checkout goes on PYTHONPATH (the launcher's forkserver
# and its node processes inherit it), and the whole script is bounded by `timeout` so that a
# hang still leaves the results written so far in $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
OUT=${OUT:-gpu-out}
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
exec timeout -k 10 "${LIMIT_S:-280}" "$PY" -m bench.gpu --out "$OUT" "$@"
