#!/usr/bin/env bash
# The GPU check (benchmarks/gpu_check.py) on a machine without network: one H200, 16 cores.
#
#   scripts/device_gpu.sh fetch   here, with network: the wheels into .whl/ (device_cores.sh's)
#   scripts/device_gpu.sh run     there: install them, run the check, results into $OUT
#
# The machine brings Python 3.12 with torch, transformers and NVML (nvidia-ml-py); the wheels
# are modelhost's other base dependencies, and travel as the device call's `carry` (.whl).
# The check takes at most 8 minutes; timeout stops it at 7:50 so its results still come back.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
SITE=${SITE:-/tmp/site}
# shellcheck source=scripts/device_wheels.sh
source scripts/device_wheels.sh

run() {
    local out=${OUT:-/tmp/gpu-out}
    mkdir -p "$out"
    install_wheels "import modelhost.app, torch, transformers, pynvml
assert torch.cuda.is_available(), 'no CUDA device here'"
    {
        date -u
        git rev-parse HEAD 2>/dev/null || echo "no git here"
        nproc
        $PYTHON -VV
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
        $PYTHON -c "import torch, transformers; print(torch.__version__, transformers.__version__)"
    } >"$out/env.txt"
    export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
    timeout 470 $PYTHON benchmarks/gpu_check.py --device cuda --out "$out" "$@" 2>&1 |
        tee "$out/gpu_check.log"
}

case "${1:-}" in
fetch) scripts/device_cores.sh fetch ;;
run) shift && run "$@" ;;
*) echo "usage: $0 fetch|run [gpu_check.py arguments]" >&2 && exit 2 ;;
esac
