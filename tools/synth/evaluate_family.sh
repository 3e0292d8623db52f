#!/usr/bin/env bash
# After tools/synth/train_all.py: chooses the default CFG scale on validation prompts, measures
# SynthEval of the target and the drafter over every held-out prompt with the C++ engine,
# writes the sample grid and the model card (models/synth/README.md).
#
#   tools/synth/evaluate_family.sh [--limit=N]   (N held-out prompts; default all 512)
set -euo pipefail
cd "$(dirname "$0")/../.."
limit=0
for arg in "$@"; do
  case "$arg" in
    --limit=*) limit="${arg#*=}" ;;
    *) echo "evaluate_family: unknown argument $arg" >&2; exit 2 ;;
  esac
done
bazel build //bench:synth_quality
echo "[evaluate_family] 1/3 default CFG scale on validation prompts" >&2
/usr/bin/python3 tools/synth/choose_cfg.py
echo "[evaluate_family] 2/3 SynthEval on held-out prompts (target and drafter, ar)" >&2
mkdir -p out/bench
bazel-bin/bench/synth_quality --models=models/synth --limit="$limit" \
  --json_out=out/bench/quality.json --grid_out=models/synth/samples.png | tee out/bench/quality.md
echo "[evaluate_family] 3/3 model card" >&2
/usr/bin/python3 tools/synth/model_card.py --quality out/bench/quality.json
