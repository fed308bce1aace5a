#!/bin/bash
# One device session: install the carried wheels, gpu-check (no Ray there), then the paper's
# throughput-resolution sweep (attention sdpa/math vs ssog, 3 regimes, fp32 and bf16) and a
# ViT-Ti training-step bench. Every step is bounded; JSONL records survive a timeout.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD/platform
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv; nproc;
  python3 -c "import torch,torchdiffeq,pydantic,typer;print('torch',torch.__version__,'cuda',torch.version.cuda,'torchdiffeq',torchdiffeq.__version__,'pydantic',pydantic.__version__,'typer',typer.__version__)"; } 2>&1 | tee $OUT/env.txt
echo "== doctor"; date +%s
timeout 180 python3 -m vitscale.doctor --gpu --skip study 2>&1 | tee $OUT/doctor.txt
echo "== throughput-resolution inference"; date +%s
timeout 150 python3 -m vitscale bench --study studies/throughput_resolution.yaml --mixers attention,ssog --dtypes float32,bfloat16 --jsonl $OUT/tr_inference.jsonl 2>&1 | tee $OUT/tr_inference.txt | tail -80
echo "== train step ViT-Ti 224"; date +%s
timeout 90 python3 -m vitscale bench --study studies/throughput_resolution.yaml --mixers attention,ssog --mode train --resolutions 224,512 --batch-size 32 --dtypes float32,bfloat16 --repeats 10 --jsonl $OUT/tr_train.jsonl 2>&1 | tee $OUT/tr_train.txt | tail -60
date +%s
