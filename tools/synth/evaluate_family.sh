#!/usr/bin/env bash
# After tools/synth/train_all.py: chooses the default CFG scale and then MuLo-SD's served
# defaults (tools/synth/calibrate_mulo.py) on validation prompts, measures
# SynthEval of the target and the drafter over every held-out prompt with the C++ engine,
# writes the sample grid and the model card (models/synth/README.md).
#
#   tools/synth/evaluate_family.sh [--limit=N] [--models=DIR]
#
# N held-out prompts (default all 512); DIR the family (default models/synth: a candidate
# family trained elsewhere, with family.json and heldout_prompts.jsonl copied in, is judged
# the same way before it replaces the bundled one). Results go to out/bench/<DIR's name>/.
set -euo pipefail
cd "$(dirname "$0")/../.."
limit=0
models=models/synth
for arg in "$@"; do
  case "$arg" in
    --limit=*) limit="${arg#*=}" ;;
    --models=*) models="${arg#*=}" ;;
    *) echo "evaluate_family: unknown argument $arg" >&2; exit 2 ;;
  esac
done
bazel build //bench:synth_quality //bench:methods_bench
echo "[evaluate_family] 1/4 default CFG scale on validation prompts" >&2
/usr/bin/python3 tools/synth/choose_cfg.py --models "$models"
echo "[evaluate_family] 2/4 MuLo-SD defaults on validation prompts" >&2
/usr/bin/python3 tools/synth/calibrate_mulo.py --models "$models"
echo "[evaluate_family] 3/4 SynthEval on held-out prompts (target and drafter, ar)" >&2
results="out/bench/$(basename "$models")"
mkdir -p "$results"
bazel-bin/bench/synth_quality --models="$models" --limit="$limit" \
  --json_out="$results/quality.json" --grid_out="$models/samples.png" | tee "$results/quality.md"
echo "[evaluate_family] 4/4 model card" >&2
/usr/bin/python3 tools/synth/model_card.py --models "$models" --quality "$results/quality.json"
