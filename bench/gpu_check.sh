#!/usr/bin/env bash
# The GPU check (bench/gpu_check.py): prepare here, measure on a lent CUDA machine.
#
#   bench/gpu_check.sh prepare            # here (CPU, minutes): frames, CPU boxes, the ultralytics wheel
#   bench/gpu_check.sh dry-run [OUT]      # here: the whole run on the CPU, without CUDA/TensorRT calls
#   bench/gpu_check.sh run [OUT]          # on the CUDA machine, one command, < 8 min
#
# On the device machine (its python3 has torch, transformers, timm, opencv, onnxruntime, not
# ultralytics): the tool's `run` with carry ["bench/gpu_check_data", ".whl"] (prepare lists
# both in .git/info/exclude: generated, never committed) and the command
#   bench/gpu_check.sh run $OUT TensorRT is measured only where the
# tensorrt package is importable (it is not in that image, and its wheels exceed what a call
# can carry): the section then says so.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=bench/gpu_check_data
step=${1:-}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 YOLO_OFFLINE=1
case "$step" in
  prepare)
    PY=${PYTHON:-$PWD/.venv/bin/python}  # the project venv (make setup)
    PYTHONPATH=$PWD/src "$PY" bench/gpu_check.py prepare "$DATA"
    mkdir -p .whl
    ver=$("$PY" -c 'import ultralytics; print(ultralytics.__version__)')
    "$PY" -m pip download -q --no-deps --only-binary=:all: -d .whl "ultralytics==$ver"
    ls -l .whl "$DATA"
    ;;
  dry-run)
    PY=${PYTHON:-$PWD/.venv/bin/python}  # the project venv (make setup)
    PYTHONPATH=$PWD/src "$PY" bench/gpu_check.py run "$DATA" "${2:-/tmp/gpu_check_dry}" --dry-run --budget 1800
    ;;
  run)
    PY=${PYTHON:-python3}
    site=/tmp/probench-site
    if ! "$PY" -c 'import ultralytics' 2>/dev/null; then
      "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl
    fi
    PYTHONPATH=$PWD/src:$site timeout 470 "$PY" bench/gpu_check.py run "$DATA" "${2:-${OUT:-/tmp/gpu_check}}" --budget 400
    ;;
  *)
    echo "usage: bench/gpu_check.sh prepare | dry-run [OUT] | run [OUT]" >&2
    exit 2
    ;;
esac
