#!/usr/bin/env bash
# The experiments of nbs/13_experiments.ipynb (compare, queries, layers, low-shot) and a full-data run for the
# leaderboard patterns, on one lent GPU, results under OUT (default nbs/data/experiments/gpu). Each run has a time
# limit (seconds, second field); a run cut short keeps its finished training runs in <name>.parts/ and continues when
# the same command runs again. A bare GPU machine: bash tests/gpu_prepare.sh here first, then carry .gpu_carry.
#   bash tests/gpu_experiments.sh --out DIR [--only compare,full] [--budget SECONDS]
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd); PY=${PYTHON:-python3}; OUT=nbs/data/experiments/gpu; ONLY=""; BUDGET=540
while [ $# -gt 0 ]; do
  case $1 in
    --out) OUT=$2; shift 2;;
    --only) ONLY=$2; shift 2;;
    --budget) BUDGET=$2; shift 2;;      # stop starting runs when less than a run's limit is left
    *) echo "gpu_experiments.sh: error: unknown argument $1" >&2; exit 2;;
  esac
done
export MPLBACKEND=Agg PYTHONUNBUFFERED=1
mkdir -p "$OUT"
if [ -d .gpu_carry/wheels ]; then          # a bare machine: the carried wheels and Fashion-MNIST (tests/gpu_prepare.sh)
  SITE=${TMPDIR:-/tmp}/ep_gpu_site
  $PY -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --no-cache-dir --upgrade --target "$SITE" \
    .gpu_carry/wheels/*.whl . > "$OUT/setup.log" 2>&1 || tail -20 "$OUT/setup.log"
  export PYTHONPATH="$REPO:$SITE" PATH="$SITE/bin:$PATH"
fi
if [ -d .gpu_carry/fashion-mnist ]; then
  export XDG_CACHE_HOME=${TMPDIR:-/tmp}/ep_xdg; mkdir -p "$XDG_CACHE_HOME/ep_probing"
  cp -r .gpu_carry/fashion-mnist "$XDG_CACHE_HOME/ep_probing/"
  $PY -c "import lzma, pathlib, sys
for f in pathlib.Path(sys.argv[1]).glob('*.xz'): f.with_suffix('').write_bytes(lzma.open(f).read()); f.unlink()
" "$XDG_CACHE_HOME/ep_probing/fashion-mnist"   # carried smaller as .xz: raw IDX files
fi
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$OUT/device.txt" 2>&1
$PY -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())" >> "$OUT/device.txt" 2>&1
CACHE=${TMPDIR:-/tmp}/ep_gpu_cache
RUNS=(
  "compare 240 ep_experiment --which compare --out $OUT/compare.csv --train_size 10000 --seeds 0,1,2 --cache_dir $CACHE"
  "full 150 ep_probe --data fashion_mnist --layers all --probes lp,gap,ep,ep_all --out $OUT/full --cache_dir $CACHE"
  "queries 90 ep_experiment --which queries --out $OUT/queries.csv --train_size 10000 --seeds 0,1,2 --cache_dir $CACHE"
  "layers 90 ep_experiment --which layers --out $OUT/layers.csv --train_size 10000 --seeds 0,1,2 --cache_dir $CACHE"
  "lowshot 200 ep_experiment --which lowshot --out $OUT/lowshot.csv --seeds 0,1,2 --cache_dir $CACHE"
)
t0=$SECONDS
for r in "${RUNS[@]}"; do
  read -r name limit cmd <<< "$r"
  [ -n "$ONLY" ] && [[ ",$ONLY," != *",$name,"* ]] && continue
  left=$((BUDGET - (SECONDS - t0)))
  [ $left -lt 30 ] && { echo "$name: skipped, ${left}s of the budget left"; continue; }
  [ $limit -gt $left ] && limit=$left
  echo "=== $name (limit ${limit}s): $cmd"
  s=$SECONDS; timeout -s INT $limit $cmd > "$OUT/$name.log" 2>&1; rc=$?
  echo "$name rc=$rc $((SECONDS - s))s"; tail -3 "$OUT/$name.log"
  printf '{"run": "%s", "rc": %d, "seconds": %d, "command": "%s"}\n' "$name" $rc $((SECONDS - s)) "$cmd" >> "$OUT/runs.jsonl"
done
