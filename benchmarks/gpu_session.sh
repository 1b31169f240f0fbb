#!/usr/bin/env bash
# One lent-GPU session's measurements in one call (device time is short: ~15 min, starts included).
# The GPU machine has torch but no Ray or DeepSpeed and no package index: put wheels of ray 2.60.0 and
# deepspeed 0.19.8 (with hjson, pydantic, jsonschema and their needs) for CPython 3.12 x86-64 in
# .gpu-wheels/ (git-ignored), carry that folder, and run this from the project root:
#   bash benchmarks/gpu_session.sh            # ~8 min on an H100; STEPS, GPU_CHECK_S, PROFILE_S, SUBWORD_S tune it
# Order = priority: gpu_check (compile, lamb, eager and compiled learning runs), then a profile of the
# base model's step, then CANINE-S eager throughput. Each stage has its own time limit; all output
# lands in $OUT (gpu_check.log, profile.log, subword.log) and the reply's tail holds the summaries.
set -u
OUT=${OUT:-/tmp/gpu-session}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .gpu-wheels/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD RAY_USAGE_STATS_ENABLED=0 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader
python3 -c "import torch, deepspeed, ray; print('torch', torch.__version__, 'deepspeed', deepspeed.__version__, 'ray', ray.__version__)"
start=$SECONDS
timeout ${GPU_CHECK_S:-390} python3 benchmarks/gpu_check.py --steps ${STEPS:-40} "$@" >"$OUT/gpu_check.log" 2>&1
echo "gpu_check exit $? after $((SECONDS - start)) s"
sed -n '/^gpu_check on/,$p' "$OUT/gpu_check.log"
grep -E "Error|error:|Traceback" "$OUT/gpu_check.log" | head -8
start=$SECONDS
timeout ${PROFILE_S:-80} python3 benchmarks/model_speed.py --device cuda --config base --batch 64 --steps 4 --warmup 2 \
  --dtypes bf16 --variants b --profile 2 --profile-rows 25 >"$OUT/profile.log" 2>&1
echo "profile exit $? after $((SECONDS - start)) s"; tail -45 "$OUT/profile.log"
start=$SECONDS
timeout ${SUBWORD_S:-90} python3 benchmarks/train_throughput.py --config base --workers 1 --steps 30 --warmup 8 \
  --objective subword --json "$OUT/subword.json" >"$OUT/subword.log" 2>&1
echo "subword exit $? after $((SECONDS - start)) s"; tail -6 "$OUT/subword.log"
