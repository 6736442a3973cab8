#!/bin/sh
# scripts/mllog-venv.sh [DIR] — a Python venv with MLCommons' mlperf-logging (its compliance checker), for
# tests/cli/run_mllog.sh to check dlperf train --mllog against. A test tool only: dlperf never needs it.
# Default DIR: $DLPERF_CACHE/mllog-venv (or ~/.cache/dlperf/mllog-venv). Prints the venv's python.
set -eu
DIR=${1:-${DLPERF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dlperf}/mllog-venv}
PY=${PYTHON:-python3}
if [ ! -x "$DIR/bin/python" ]; then
    "$PY" -m venv "$DIR" >&2
fi
"$DIR/bin/python" -c 'import mlperf_logging' 2>/dev/null || "$DIR/bin/pip" install -q mlperf-logging >&2
echo "$DIR/bin/python"
