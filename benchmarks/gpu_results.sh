#!/usr/bin/env bash
# Regenerate the GPU record in docs/log/gpu/ (or the folder given first): the CUDA tests, the
# minifier against torch's own on the anchor workload, and the real-model audit. Needs a CUDA GPU
# and timm, torchvision and transformers; about 45 minutes on one H200, most of it the audit and
# torch's isolated minifier. Arguments after the folder go to zoo.py (e.g. --models bert,t5).
# Every step runs even when an earlier one fails; the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/log/gpu}
anchor=${ANCHOR:-benchmarks/anchor_model.py}
mkdir -p "$out"
status=0
failed() { [ "$status" -ne 0 ] || status=$1; }

python -m pytest tests/gpu -n 5 -q -rA -p no:cacheprovider >"$out/test_cuda.log" 2>&1 || failed $?
grep -E '^(PASSED|FAILED|ERROR|SKIPPED) |^[0-9]+ (passed|failed)|^=+ .*(passed|failed)' "$out/test_cuda.log" \
    | tee "$out/test_cuda.txt"
rm -f "$out/test_cuda.log"

python benchmarks/minify_vs_torch.py --layers 12 --bug-at 7 --device cuda --anchor "$anchor" 2>&1 \
    | grep -v -i warn | tee "$out/minify_vs_torch.txt" || failed $?

python benchmarks/zoo.py --device cuda --json "$out/zoo.json" --markdown "$out/zoo.md" "${@:2}" || failed $?

exit "$status"
