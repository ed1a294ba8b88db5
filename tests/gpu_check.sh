#!/usr/bin/env bash
# The GPU check of issues 15 and 39: everything ep_probing claims about CUDA, run once on the GPUs lent (about 8 minutes),
# every measurement written to a results folder (default nbs/data/gpu/) for the docs.
#   bash tests/gpu_check.sh [--out DIR] [--data_path DIR] [--wheels DIR] [--tar FILE]   # on a machine with a CUDA GPU
# ep_probe runs on its default data (the embedded Fashion-MNIST sample: 10,000 train, 10,000 test images); ep_pretrain needs
# the Fashion-MNIST train IDX files (--data_path, else the Debian package's). A bare GPU machine: see tests/gpu_prepare.sh.
#   bash tests/gpu_check.sh --dry_run     # on any machine: print the commands, check programs, flags, notebooks, the report writer
#   bash tests/gpu_check.sh --list        # the step names and their commands
#   --only STEP,STEP: run (or dry-run) just these steps; their records in OUT/steps.json are replaced, the others kept
# Each step's output goes to OUT/logs/<step>.log and its exit status and seconds to OUT/steps.json; a failed step does not
# stop the others; at the end OUT/summary.json and OUT/summary.md are written and the script exits 1 if any step failed.
# A step's command can be replaced for one run with GPU_CHECK_CMD_<step>='...' (the tests use it to break a flag).

# ---- THE STEPS: every command line of the check, in one place (adapt flags here) ----------------------------------------
define_steps() {
  step device                 "$PY tests/gpu_check.py device --out $OUT"
  step nbdev_cuda_04a_zoo     "nbdev_test --flags cuda --path nbs/04a_zoo.ipynb"
  step nbdev_cuda_05_encoders "nbdev_test --flags cuda --path nbs/05_encoders.ipynb"
  step pytest_cuda            "$PY -m pytest $CUDA_TESTS -m cuda --cuda -q -p no:cacheprovider"
  step bench_fp32             "ep_bench --device cuda --probes ep,ep_value_first,mhca,mhca_pool_first --batch_size 64 --num_tokens 196 --dim 768 --num_classes 1000 --steps 20 --warmup 5 --csv $OUT/bench_fp32.csv"
  step bench_bf16             "ep_bench --device cuda --probes ep,ep_value_first,mhca,mhca_pool_first --batch_size 64 --num_tokens 196 --dim 768 --num_classes 1000 --steps 20 --warmup 5 --amp --csv $OUT/bench_bf16.csv"
  step bench_zoo              "ep_bench --device cuda --probes all --steps 20 --warmup 5 --csv $OUT/bench_zoo.csv"
  step bench_zoo_bf16         "ep_bench --device cuda --probes all --steps 20 --warmup 5 --amp --csv $OUT/bench_zoo_bf16.csv"
  step ep_probe               "$TIMEV ep_probe --device cuda --out $OUT/ep_probe --cache_dir $WORK/cache"
  step ep_probe_fp16          "$TIMEV ep_probe --device cuda --precision fp16 --out $OUT/ep_probe_fp16 --cache_dir $WORK/cache_fp16"
  step ep_probe_bf16          "$TIMEV ep_probe --device cuda --precision bf16 --out $OUT/ep_probe_bf16 --cache_dir $WORK/cache_bf16"
  step ep_probe_stream        "$TIMEV ep_probe --stream --epochs 1 --workers 4 --device cuda --train_size 10000 --valid_pct 0.1 --out $OUT/ep_probe_stream"
  step bench_train_grid       "ep_bench_train --only stack,grid"
  step recipe_paper           "$TIMEV ep_probe --recipe paper --epochs 1 --workers 4 --device cuda --train_size 10000 --out $OUT/recipe_paper"
  step pretrain               "mkdir -p $WORK/pretrain && ep_pretrain --epochs 2 --limit 10000 --out $WORK/pretrain/mae_fmnist_vit $PRETRAIN_DATA && cp $WORK/pretrain/mae_fmnist_vit.json $OUT/pretrain.json"
  step ddp_nccl               "torchrun --nproc_per_node=1 --master_port=29547 tests/gpu_ddp.py $OUT/ddp --epochs 1"
  step scale_vitb             "ep_bench_train --only scale --model vit_base_patch16_224 --sizes 512,1024,2048 --bs 128 --workers 8 --out $OUT/scale"
  step ep_probe_ddp           "$TIMEV torchrun --nproc_per_node=$NGPU --master_port=29549 --no-python ep_probe --device cuda --out $OUT/ep_probe_ddp --cache_dir $WORK/cache_ddp"
  step ep_probe_times         "$PY tests/gpu_times.py $OUT/times --device cuda --cache_dir $WORK/cache_times --imports"
  step head_compile           "$PY tests/gpu_step.py $OUT/step --device cuda --modes eager,fused,compile,graphs"
  step decode                 "$PY tests/gpu_decode.py $OUT/decode --device cuda --n 1024 --bs 128 --workers 8 --model vit_base_patch16_224 --work $WORK/decode"
}
CUDA_NOTEBOOKS="nbs/04a_zoo.ipynb nbs/05_encoders.ipynb"   # the notebooks with `#| cuda` cells (grep -l '#| cuda' nbs/*.ipynb nbs/tutorials/*.ipynb)
CUDA_TESTS="tests/test_cuda.py"                            # the test files with `pytest.mark.cuda` tests (other files need packages a GPU image may lack)
STEP_TIMEOUT=${GPU_CHECK_STEP_TIMEOUT:-240}                # seconds before a hung step is killed (and counted as failed)
# ------------------------------------------------------------------------------------------------------------------------

set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
PY=${PYTHON:-python3}
export MPLBACKEND=Agg PYTHONUNBUFFERED=1 GPU_CHECK_CMDLINE="bash tests/gpu_check.sh $*"
OUT=nbs/data/gpu; DRY=0; LIST=0; DATA=""; WHEELS=""; TAR=""; ONLY=""
while [ $# -gt 0 ]; do
  case $1 in
    --out) OUT=$2; shift 2;;
    --data_path) DATA=$2; shift 2;;          # ep_pretrain: folder of the Fashion-MNIST train IDX files (default: the Debian package's)
    --wheels) WHEELS=$2; shift 2;;           # folder of wheels to install first (a bare GPU machine; see tests/gpu_prepare.sh)
    --tar) TAR=$2; shift 2;;                 # also pack the results folder into this .tar.gz
    --only) ONLY=$2; shift 2;;               # comma-separated step names
    --dry_run) DRY=1; shift;;
    --list) LIST=1; shift;;
    -h|--help) sed -n '2,12p' "$0"; exit 0;;
    *) echo "gpu_check.sh: error: unknown argument $1 (see --help)" >&2; exit 2;;
  esac
done
PRETRAIN_DATA=${DATA:+--data $DATA}
TIMEV=""; [ -x /usr/bin/time ] && TIMEV="/usr/bin/time -v"
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU"); [ "${NGPU:-0}" -gt 0 ] 2>/dev/null || NGPU=1   # torchrun: every GPU lent
WORK=${TMPDIR:-/tmp}/ep_gpu_check.$$              # feature cache and pretrained weights: large, kept out of the results
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"   # this tree's ep_probing, whatever is installed

NAMES=(); CMDS=()
step() { local o="GPU_CHECK_CMD_$1"; NAMES+=("$1"); CMDS+=("${!o:-$2}"); }
define_steps
if [ -n "$ONLY" ]; then
  keep_n=(); keep_c=()
  for o in ${ONLY//,/ }; do
    found=0; for i in "${!NAMES[@]}"; do [ "${NAMES[$i]}" = "$o" ] && { keep_n+=("$o"); keep_c+=("${CMDS[$i]}"); found=1; }; done
    [ $found = 1 ] || { echo "gpu_check.sh: error: --only $o: no such step; the steps are ${NAMES[*]}" >&2; exit 2; }
  done
  NAMES=("${keep_n[@]}"); CMDS=("${keep_c[@]}")
fi

if [ $LIST = 1 ]; then for i in "${!NAMES[@]}"; do printf '%s\t%s\n' "${NAMES[$i]}" "${CMDS[$i]}"; done; exit 0; fi

if [ $DRY = 1 ]; then
  echo "gpu_check.sh --dry_run: ${#NAMES[@]} steps, results would go to $OUT (nothing is written there)"
  for i in "${!NAMES[@]}"; do printf '  %-24s %s\n' "${NAMES[$i]}" "${CMDS[$i]}"; done
  fail=0; args=()
  for i in "${!NAMES[@]}"; do args+=(--step "${NAMES[$i]}" "${CMDS[$i]}"); done
  echo "== programs and flags (each program's --help)"
  $PY tests/gpu_check.py flags "${args[@]}" || fail=1
  echo "== notebooks with #| cuda cells"
  $PY tests/gpu_check.py notebooks $CUDA_NOTEBOOKS || fail=1
  listed=$(grep -l '#| cuda' nbs/*.ipynb nbs/tutorials/*.ipynb 2>/dev/null | tr '\n' ' ')
  if [ "${listed% }" != "$CUDA_NOTEBOOKS" ]; then echo "FAIL CUDA_NOTEBOOKS is '$CUDA_NOTEBOOKS' but these have #| cuda cells: '${listed% }'"; fail=1; fi
  listed=$(grep -l 'pytest.mark.cuda' tests/test_*.py 2>/dev/null | tr '\n' ' ')
  if [ "${listed% }" != "$CUDA_TESTS" ]; then echo "FAIL CUDA_TESTS is '$CUDA_TESTS' but these have pytest.mark.cuda tests: '${listed% }'"; fail=1; fi
  echo "== pytest cuda tests (collected with --cuda, deselected without)"
  with=$($PY -m pytest $CUDA_TESTS -m cuda --cuda --collect-only -q -p no:cacheprovider 2>&1 | grep -c '::')
  without=$($PY -m pytest $CUDA_TESTS --collect-only -q -p no:cacheprovider 2>&1 | grep -c '::')
  if [ "$with" -gt 0 ] && [ "$without" = 0 ]; then echo "ok   $with cuda tests collected with --cuda, none without"
  else echo "FAIL cuda tests: $with collected with --cuda (want > 0), $without without (want 0)"; fail=1; fi
  echo "== report writer"
  $PY tests/gpu_check.py selftest --steps "$(IFS=,; echo "${NAMES[*]}")" || fail=1
  if [ $fail = 0 ]; then echo "gpu_check.sh --dry_run: all checks passed"; else echo "gpu_check.sh --dry_run: FAILED (see FAIL lines)"; fi
  exit $fail
fi

mkdir -p "$OUT/logs" "$WORK" || exit 1
[ -z "$ONLY" ] && rm -f "$OUT/steps.json"
if [ -n "$WHEELS" ]; then                                  # a bare machine: the packages it lacks, then this project (console scripts)
  SITE=${TMPDIR:-/tmp}/ep_gpu_site
  { $PY -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --no-cache-dir --upgrade --target "$SITE" \
      "$WHEELS"/*.whl . ; } > "$OUT/logs/setup.log" 2>&1 ||         # one install: one bin/ with every console script
    { echo "gpu_check.sh: installing the wheels of $WHEELS failed; see $OUT/logs/setup.log" >&2; tail -20 "$OUT/logs/setup.log" >&2; }
  export PYTHONPATH="$REPO:$SITE" PATH="$SITE/bin:$PATH"
fi
failed=0; sfail=0
for i in "${!NAMES[@]}"; do
  name=${NAMES[$i]}; cmd=${CMDS[$i]}; log="$OUT/logs/$name.log"
  printf '\n=== %s\n%s\n' "$name" "$cmd"
  t0=$(date +%s.%N)
  { echo "\$ $cmd"; timeout -k 10 "$STEP_TIMEOUT" bash -c "$cmd"; } > "$log" 2>&1
  rc=$?
  secs=$($PY -c "print(round($(date +%s.%N) - $t0, 1))")
  $PY tests/gpu_check.py record --out "$OUT" --name "$name" --command "$cmd" --rc $rc --seconds "$secs" --log "$log"
  if [ $rc = 0 ]; then echo "ok ($secs s)"; else failed=$((failed+1)); echo "FAILED: rc $rc after $secs s; last lines of $log:"; tail -15 "$log"; fi
done
$PY tests/gpu_check.py summary --out "$OUT" > "$OUT/logs/summary.log" 2>&1 || { echo "FAILED: the summary (see $OUT/logs/summary.log)"; sfail=1; }
rm -rf "$WORK"
[ -f "$OUT/summary.md" ] && cat "$OUT/summary.md"
[ -n "$TAR" ] && tar czf "$TAR" -C "$OUT" .
echo "gpu_check.sh: $(( ${#NAMES[@]} - failed )) of ${#NAMES[@]} steps passed; results in $OUT"
[ $failed = 0 ] && [ $sfail = 0 ]
