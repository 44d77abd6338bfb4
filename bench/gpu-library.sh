#!/usr/bin/env bash
# Issue 14's GPU checks in one device call, on a machine without Go: build
# here with `make gpu`, then run from the repository root there:
#
#   bash bench/gpu-library.sh
#
# 1. The default run (the addition task) on the GPU, its weights answered
#    by examples/generate (-addition 1000 held-out problems) with its
#    tokens/s, and tools/check_gpt2_logits.py: PyTorch loads strata's save
#    in both layouts and gives the same logits (full forward and KV cache).
# 2. train-gpt -tokenizer gpt2 -config gpt2 on a text (the repository's Go
#    sources and docs, about 2 MB): the loss falls, and the loss plot.
#
# Results go to $OUT (default /tmp/strata-gpu): summary.txt and the logs.
set -u
OUT=${OUT:-/tmp/strata-gpu}
mkdir -p "$OUT"
say() { echo "== $*" | tee -a "$OUT/summary.txt"; }
if [ -f .gpu/strata-gpu.tar.xz ] && [ ! -x .gpu/generate ]; then tar -C .gpu -xJf .gpu/strata-gpu.tar.xz; fi

start=$(date +%s)
timeout 120 .gpu/train-gpt -device cuda -quiet -eval-every 1000 -out "$OUT/add.safetensors" > "$OUT/train-default.log" 2>&1
say "default run on the GPU: exit $? in $(( $(date +%s) - start ))s; $(grep -E '^step' "$OUT/train-default.log" | tail -1)"
timeout 120 .gpu/generate -weights "$OUT/add.safetensors" -device cuda -addition 1000 > "$OUT/generate-addition.log" 2>&1
say "generate -addition 1000 on the GPU: exit $?; $(tail -3 "$OUT/generate-addition.log" | tr '\n' ' ')"
timeout 120 .gpu/generate -weights "$OUT/add.safetensors" -device cuda -prompt "123+456=" -max-new 200 -runs 4 > "$OUT/generate-speed.log" 2>&1
say "generate 200 tokens on the GPU: exit $?; $(grep -iE 'tokens/s|median' "$OUT/generate-speed.log" | tail -2 | tr '\n' ' ')"
timeout 180 python3 tools/check_gpt2_logits.py --generate .gpu/generate --weights "$OUT/add.safetensors" --device cuda > "$OUT/check-logits.log" 2>&1
say "PyTorch logits check: exit $?"; tail -12 "$OUT/check-logits.log" | tee -a "$OUT/summary.txt"

# A text of the repository's own sources and docs, GPT-2-tokenized.
find . -name '*.go' -o -name '*.md' | grep -v '^./.gpu' | sort | xargs cat > /tmp/strata-src.txt
start=$(date +%s)
timeout 240 .gpu/train-gpt -device cuda -config gpt2 -tokenizer gpt2 -data /tmp/strata-src.txt -precision bf16 -attention fused \
  -steps 150 -batch 8 -eval-every 50 -sample 40 -quiet -out "$OUT/gpt2-src.safetensors" -loss-log "$OUT/gpt2-src-loss.jsonl" \
  -loss-plot "$OUT/gpt2-src-loss.png" > "$OUT/train-gpt2-tokenizer.log" 2>&1
say "train-gpt -tokenizer gpt2 -config gpt2 (150 bf16 steps on $(wc -c < /tmp/strata-src.txt) bytes of source): exit $? in $(( $(date +%s) - start ))s"
grep -E '^step|^data|tokeniz|held-out' "$OUT/train-gpt2-tokenizer.log" | head -12 | tee -a "$OUT/summary.txt"
rm -f "$OUT/gpt2-src.safetensors" "$OUT/gpt2-src.state.safetensors"
