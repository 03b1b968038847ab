#!/usr/bin/env bash
# The main job on the bundled sample (README "Two commands", `make demo`): the Pro-Bench
# evaluation through the ROS 2 graph (bag -> grounding_node -> evaluator_node -> cache ->
# metrics -> report), offline.
#   scripts/demo.sh [DATASET] [MODEL] [WEIGHTS]
#     defaults: datasets/probench-sample, tiny-owlv2, the local caches
# Output goes to $PROBENCH_DEMO_OUT (default out/demo). tiny-owlv2 has random weights, so the
# demo runs offline: the numbers show the pipeline works, not a model's accuracy. For a real
# model (see `probench models`), fetch its weights once on a machine with internet
# (`probench fetch MODEL`, docs/MODELS.md) or give a local checkpoint as WEIGHTS (a folder,
# or an ultralytics .pt file): it is passed to `probench eval --weights`.
# Rerunning after an interruption resumes the run (the run folder is per model).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# DDS stays on loopback (no traffic may leave the machine here); the user may widen it.
export ROS_AUTOMATIC_DISCOVERY_RANGE="${ROS_AUTOMATIC_DISCOVERY_RANGE:-LOCALHOST}"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" TRANSFORMERS_OFFLINE="${TRANSFORMERS_OFFLINE:-1}" YOLO_OFFLINE="${YOLO_OFFLINE:-1}"

DATASET="${1:-datasets/probench-sample}"
MODEL="${2:-tiny-owlv2}"
WEIGHTS="${3:-}"
OUT="${PROBENCH_DEMO_OUT:-out/demo}"
PB="${PROBENCH:-probench}"
command -v "$PB" >/dev/null || { echo "demo: '$PB' not found; run 'make setup' first" >&2; exit 2; }
run() { echo "demo: probench $*" >&2; "$PB" "$@"; }

mkdir -p "$OUT"
run validate "$DATASET"
# The committed bag is the sample dataset; another dataset is bagged first.
BAG=bags/probench-sample
if [ "$DATASET" != "datasets/probench-sample" ]; then
  BAG="$OUT/bag-$(basename "$DATASET")"
  [ -f "$BAG/metadata.yaml" ] || run bag --dataset "$DATASET" --out "$BAG" --compressed
fi
case "$MODEL" in
  tiny-*) echo "demo: model $MODEL has tiny RANDOM weights: its scores (near 0) show that the pipeline works, not what the model can do" >&2 ;;
  *) echo "demo: model $MODEL with its real weights (from ${WEIGHTS:-the local caches; \`probench fetch $MODEL\` fills them})" >&2 ;;
esac
WEIGHT_ARGS=()
[ -n "$WEIGHTS" ] && WEIGHT_ARGS=(--weights "$WEIGHTS")
echo "demo: replaying $BAG at 30 Hz through grounding_node, each frame with its own prompt set (camera-rate: frames the model cannot keep up with count as missed)" >&2
RUN="$OUT/run-$MODEL"
run eval --model "$MODEL" --bag "$BAG" --out "$RUN" "${WEIGHT_ARGS[@]}"
run report "$RUN" --reference paper --out "$OUT/report"
# The stream in one line, from the run's realtime.json: achieved rate, missed frames, warm-up.
python3 - "$RUN/realtime.json" <<'PY' >&2
import json, sys
rt = json.load(open(sys.argv[1]))
fmt = lambda v, d=1: "-" if v is None else f"{v:.{d}f}"
print(f"demo: stream {rt['frames_sent']} frames at {fmt(rt.get('achieved_send_rate_hz'))} Hz "
      f"(asked {rt['rate_hz']:g} Hz): {rt['frames_missed']} missed, {rt['frames_received']} answered, "
      f"delivered {fmt(rt.get('delivered_rate_hz'))} Hz; latency p50 {fmt(rt['latency_ms']['p50'])} ms; "
      f"{rt['warmup']['frames']} warm-up frame(s) sent before, scored nowhere")
PY
echo "demo: done; open $OUT/report/report.md (latency timeline: $OUT/report/fig_latency_timeline.png; metrics: $RUN/metrics.json)" >&2
