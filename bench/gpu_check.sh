#!/usr/bin/env bash
# The GPU check (bench/gpu_check.py): prepare here, measure on a lent CUDA machine in one call.
#
#   bench/gpu_check.sh prepare            # here (CPU, ~1 min): frames, a frame dataset, the wheels
#   bench/gpu_check.sh dry-run [OUT]      # here: every section on the CPU, CUDA calls skipped (~1 min)
#   bench/gpu_check.sh run [OUT]          # on the CUDA machine: one command, < 8 min
#
# The device machine's python3 (3.12) has torch, torchvision, onnxruntime, opencv, tqdm, but
# not orjson, pydantic or ultralytics, and older transformers / huggingface_hub than probench's: prepare
# downloads those wheels (cp312 / abi3 / py3, manylinux x86-64) into .whl, and run installs them
# with `pip install --no-deps --target` ahead of site-packages. The tool's `run` carries the
# two ignored folders prepare writes: carry ["bench/gpu_check_data", ".whl"] (docs/CONTRIBUTING.md
# "The GPU check" has the exact call). TensorRT is measured only where tensorrt imports (its
# wheels exceed what a call can carry): the cells say so.
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=bench/gpu_check_data
step=${1:-}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 YOLO_OFFLINE=1
# what the run imports that the device's image lacks or has older: names as the venv has them
# (pydantic and its four: probench's typed run records, probench.cache.records)
WHEELS="ultralytics transformers huggingface_hub httpx2 httpcore2 tokenizers hf-xet orjson defusedxml truststore
        pydantic pydantic-core annotated-types typing-inspection typing-extensions"
case "$step" in
  prepare)
    PY=${PYTHON:-$PWD/.venv/bin/python}  # the project venv (make setup)
    PYTHONPATH=$PWD/src "$PY" bench/gpu_check.py prepare "$DATA"
    rm -rf .whl && mkdir -p .whl
    pins=$("$PY" -c 'import importlib.metadata as m, sys; print(" ".join(f"{n}=={m.version(n)}" for n in sys.argv[1:]))' $WHEELS)
    # shellcheck disable=SC2086 # one argument per pin
    "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --platform manylinux_2_5_x86_64 -d .whl $pins
    du -sh .whl "$DATA"
    ls .whl
    ;;
  dry-run)
    PY=${PYTHON:-$PWD/.venv/bin/python}  # the project venv (make setup)
    PYTHONPATH=$PWD/src "$PY" bench/gpu_check.py run "$DATA" "${2:-/tmp/gpu_check_dry}" --dry-run --budget 420
    ;;
  run)
    PY=${PYTHON:-python3}
    site=/tmp/probench-site
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl
    # 470 s: the sections' budget (420 s) + start-up; a killed run keeps every item it wrote
    PYTHONPATH=$PWD/src:$site timeout 470 "$PY" bench/gpu_check.py run "$DATA" "${2:-${OUT:-/tmp/gpu_check}}" \
      --budget 420
    ;;
  *)
    echo "usage: bench/gpu_check.sh prepare | dry-run [OUT] | run [OUT]" >&2
    exit 2
    ;;
esac
