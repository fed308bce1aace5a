#!/bin/bash
# Third call: torch.compile's training-step gain for the paper's other GPU cells: looped ViT-Ti and
# discrete ViT-B at 224 px, bf16, batch 128, eager and compiled side by side.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD/platform
B="python3 -m vitscale bench --study studies/throughput_resolution.yaml --mixers attention,ssog --attention-backend sdpa --mode train --resolutions 224 --batch-size 128 --dtypes bfloat16 --compiles false,true --warmup 3 --repeats 10"
timeout 130 $B --regimes looped --jsonl $OUT/looped_ti.jsonl 2>&1 | tee $OUT/looped_ti.txt | tail -22
timeout 150 $B --regimes discrete --set model.width=768 --set model.heads=12 --jsonl $OUT/discrete_b.jsonl 2>&1 | tee $OUT/discrete_b.txt | tail -22
