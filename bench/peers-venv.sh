#!/bin/bash
# Today's peers from PyPI in a Python virtual environment of their own (issue 14): PyTorch 2.x + torchvision,
# OpenVINO, NNCF (OpenVINO's post-training int8 quantization: bench/int8_vs_openvino.sh, issue 32) and NVIDIA DALI
# (nvidia-dali-cuda130, run CPU-only with device_id=None). Idempotent: a venv that already imports all of them is left
# as it is, and one that lacks only some gets only those. Prints the venv's path on the last line of stdout (progress goes to stderr):
#
#   PY=$(bench/peers-venv.sh | tail -1)/bin/python
#   bench/train_vs_pytorch.sh --python "$PY"         (and infer_vs_openvino.sh, data_vs_dali.sh find it themselves)
#
#   bench/peers-venv.sh [--venv DIR] [--python /usr/bin/python3] [--force]
#
# Default DIR: ${XDG_CACHE_HOME:-$HOME/.cache}/dlperf/peers-venv (or $DLPERF_PEERS_VENV). These packages are for the
# benchmarks only: they are not dlperf dependencies (scripts/setup.sh does not install them) and nothing outside
# bench/ uses them.
# torch: the CPU wheels of PyTorch's own index when it is reachable; otherwise PyPI's default wheel, which is the CUDA
# build. That one runs on the CPU too, but its import loads CUDA libraries (cuBLAS, cuDNN, NCCL, ...) that its
# nvidia-* dependencies ship: instead of all of them (several GB), the script installs torch with --no-deps, then
# imports it and installs, with --no-deps, only the nvidia-* requirement that ships each library the import misses,
# until the import works. The versions installed are written to DIR/peers-versions.txt (and printed).
set -eu
VENV=${DLPERF_PEERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dlperf/peers-venv}
BASEPY=/usr/bin/python3
FORCE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) VENV=$2; shift ;;
    --python) BASEPY=$2; shift ;;
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
PY=$VENV/bin/python
CHECK='import torch, torchvision, openvino, nncf, nvidia.dali; torch.zeros(1).sum()'
say() { echo "peers-venv: $*" >&2; }

versions() {
  "$PY" - <<'EOF'
import importlib.metadata as md, platform
names = ["torch", "torchvision", "openvino", "nncf", "nvidia-dali-cuda130", "numpy", "pillow"]
names += sorted(d.metadata["Name"] for d in md.distributions() if d.metadata["Name"].lower().startswith("nvidia-")
                and d.metadata["Name"] != "nvidia-dali-cuda130")
seen = set()
for n in names:
    if n.lower() in seen:
        continue
    seen.add(n.lower())
    try:
        print(f"{n}=={md.version(n)}")
    except md.PackageNotFoundError:
        pass
import torch
print(f"# python {platform.python_version()}; torch built with CUDA {torch.version.cuda}; "
      f"oneDNN {torch.backends.mkldnn.is_available()}")
EOF
}

if [ "$FORCE" = 0 ] && [ -x "$PY" ] && "$PY" -c "$CHECK" 2>/dev/null; then
  say "$VENV already has torch, torchvision, openvino, nncf and DALI"
  [ -s "$VENV/peers-versions.txt" ] || versions >"$VENV/peers-versions.txt"
  cat "$VENV/peers-versions.txt" >&2
  echo "$VENV"
  exit 0
fi

mkdir -p "$(dirname "$VENV")"
[ -x "$PY" ] || { say "creating $VENV"; "$BASEPY" -m venv "$VENV"; }
PIP=("$PY" -m pip install -q --disable-pip-version-check)
"${PIP[@]}" --upgrade pip packaging >&2

# torch + torchvision
if ! "$PY" -c 'import torch, torchvision; torch.zeros(1).sum()' 2>/dev/null; then
  if "${PIP[@]}" torch torchvision --index-url https://download.pytorch.org/whl/cpu --timeout 20 --retries 0 >&2 2>/dev/null; then
    say "torch: the CPU wheels"
  else
    say "torch: PyTorch's CPU index is not reachable; PyPI's default (CUDA) wheel, with only the CUDA libraries its import needs"
    "${PIP[@]}" --no-deps torch torchvision >&2
    # torch's and torchvision's own requirements, less the nvidia-* (and triton: torch.compile only) ones
    "$PY" - >"$VENV/.torch-reqs" <<'EOF'
import importlib.metadata as md
from packaging.requirements import Requirement
out = set()
for dist in ("torch", "torchvision"):
    for r in md.requires(dist) or []:
        req = Requirement(r)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        if req.name.lower().startswith("nvidia-") or req.name.lower() in ("triton", "torch"):
            continue
        out.add(str(req).split(";")[0])
print("\n".join(sorted(out)))
EOF
    # shellcheck disable=SC2046
    "${PIP[@]}" $(tr '\n' ' ' <"$VENV/.torch-reqs") >&2
    for _ in $(seq 1 20); do
      err=$("$PY" -c 'import torch' 2>&1 >/dev/null) && break
      # "libX.so.N: cannot open shared object file", or "undefined symbol: ncclFoo" when an older copy of the
      # library elsewhere on the system (a CUDA toolkit in the loader's path) was found instead of torch's own
      lib=$(printf '%s\n' "$err" | grep -o -E 'undefined symbol: [A-Za-z0-9_]+' | head -1 | sed 's/.*: /lib/')
      [ -n "$lib" ] || lib=$(printf '%s\n' "$err" | grep -o -E 'lib[A-Za-z0-9_+-]+\.so(\.[0-9]+)*' | head -1)
      pkg=$("$PY" - "$lib" <<'EOF'
import importlib.metadata as md, re, sys
from packaging.requirements import Requirement
lib = sys.argv[1]
# the library's stem -> the part of the nvidia-* package name that ships it
stems = [("cusparseLt", "cusparselt"), ("cusparse", "cusparse"), ("cudart", "cuda-runtime"), ("cuda", "cuda-runtime"),
         ("cublas", "cublas"),
         ("cudnn", "cudnn"), ("cufft", "cufft"), ("curand", "curand"), ("cusolver", "cusolver"), ("nccl", "nccl"),
         ("nvJitLink", "nvjitlink"), ("cupti", "cupti"), ("nvrtc", "nvrtc"), ("cufile", "cufile"),
         ("nvshmem", "nvshmem"), ("nvToolsExt", "nvtx"), ("nvtx", "nvtx")]
key = next((p for s, p in stems if lib.startswith("lib" + s)), None)
reqs = [Requirement(r) for r in md.requires("torch") or []]
reqs = [r for r in reqs if r.name.lower().startswith("nvidia-") and (r.marker is None or r.marker.evaluate({"extra": ""}))]
hit = [r for r in reqs if key and key in r.name.lower()]
print(str(hit[0]).split(";")[0] if hit else "")
EOF
)
      [ -n "$pkg" ] || { printf '%s\n' "$err" >&2; say "import torch fails and no nvidia-* requirement of torch ships ${lib:-the missing library}"; exit 1; }
      say "import torch needs ${lib#lib} ($(printf '%s\n' "$err" | tail -1 | cut -c1-160)): installing $pkg (--no-deps)"
      "${PIP[@]}" --no-deps "$pkg" >&2
    done
    "$PY" -c 'import torch, torchvision; torch.zeros(1).sum()' >&2
  fi
fi
"$PY" -c 'import openvino' 2>/dev/null || { say "installing openvino"; "${PIP[@]}" openvino >&2; }
# nncf with the torch and openvino already here: pip keeps them when they meet its requirements
"$PY" -c 'import nncf' 2>/dev/null || { say "installing nncf"; "${PIP[@]}" nncf >&2; }
"$PY" -c 'import nvidia.dali' 2>/dev/null || { say "installing nvidia-dali-cuda130"; "${PIP[@]}" nvidia-dali-cuda130 >&2; }
"$PY" -c "$CHECK" >&2
versions >"$VENV/peers-versions.txt"
cat "$VENV/peers-versions.txt" >&2
echo "$VENV"
