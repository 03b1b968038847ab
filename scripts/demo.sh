#!/usr/bin/env bash
# The main job on the bundled sample (README "Quick start", `make demo`).
#   scripts/demo.sh [DATASET] [MODEL]     (defaults: datasets/probench-sample, tiny-owlv2)
# Output goes to $PROBENCH_DEMO_OUT (default out/demo). tiny-owlv2 has random weights (no
# model hub is reachable here): the numbers show the pipeline works, not a model's accuracy;
# pass a real model name (see `probench models`) where its weights are available.
# Commands that have not landed yet are reported as skipped, by name.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# DDS stays on loopback (no traffic may leave the machine here); the user may widen it.
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" TRANSFORMERS_OFFLINE="${TRANSFORMERS_OFFLINE:-1}" YOLO_OFFLINE="${YOLO_OFFLINE:-1}"

DATASET="${1:-datasets/probench-sample}"
MODEL="${2:-tiny-owlv2}"
OUT="${PROBENCH_DEMO_OUT:-out/demo}"
PB="${PROBENCH:-probench}"
command -v "$PB" >/dev/null || { echo "demo: '$PB' not found; run 'make setup' first" >&2; exit 2; }

built() {  # is `probench $1` implemented yet? (the CLI says "not built yet" otherwise)
  ! "$PB" "$1" --help 2>&1 | grep -q "not built yet"
}
step() {
  local cmd="$1"
  shift
  if built "$cmd"; then
    echo "demo: probench $cmd $*" >&2
    "$PB" "$cmd" "$@"
  else
    echo "demo: SKIPPED probench $cmd (not built yet)" >&2
  fi
}

mkdir -p "$OUT"
step validate "$DATASET"
# ROS 2 path (bag -> grounding node -> evaluator) when the evaluator exists, else offline.
if built eval && built bag; then
  # The committed bag is the sample dataset; another dataset is bagged first.
  BAG=bags/probench-sample
  if [ "$DATASET" != "datasets/probench-sample" ] || [ ! -f "$BAG/metadata.yaml" ]; then
    BAG="$OUT/bag"
    rm -rf "$BAG"
    step bag --dataset "$DATASET" --out "$BAG" --compressed
  fi
  case "$MODEL" in
    tiny-*) echo "demo: model $MODEL has tiny RANDOM weights: its scores (near 0) show that the pipeline works, not what the model can do" >&2 ;;
    *) echo "demo: model $MODEL with its real weights (from the local cache or --weights)" >&2 ;;
  esac
  echo "demo: replaying $BAG at 30 Hz through grounding_node (camera-rate: frames the model cannot keep up with count as missed)" >&2
  step eval --model "$MODEL" --bag "$BAG" --out "$OUT/run"
else
  step infer --model "$MODEL" --dataset "$DATASET" --out "$OUT/run"
fi
step score --dataset "$DATASET" --run "$OUT/run"
REFERENCE=../shared/spec/table2.csv
if [ -f "$REFERENCE" ]; then
  step report "$OUT/run" --reference "$REFERENCE" --out "$OUT/report"
else
  step report "$OUT/run" --out "$OUT/report"
fi
echo "demo: done; results in $OUT" >&2
