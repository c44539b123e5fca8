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
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi -L 2>/dev/null || true
exec timeout -k 10 "${LIMIT_S:-280}" "$PY" -m bench.gpu --out "$OUT" "$@"
