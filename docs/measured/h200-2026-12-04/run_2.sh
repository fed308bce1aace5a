#!/bin/bash
# Second call: does torch.compile close SSoG's training-step gap to attention (sdpa) on the H200?
# ViT-Ti, discrete, bf16, batch 128 (past launch overhead), eager and compiled side by side.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD/platform
timeout 215 python3 -m vitscale bench --study studies/throughput_resolution.yaml --mixers attention,ssog --attention-backend sdpa --regimes discrete --mode train --resolutions 224,512 --batch-size 128 --dtypes bfloat16 --compiles false,true --warmup 3 --repeats 10 --jsonl $OUT/compile_train.jsonl 2>&1 | tee $OUT/compile_train.txt | tail -40
