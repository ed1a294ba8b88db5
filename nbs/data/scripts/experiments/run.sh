#!/usr/bin/env bash
# The heavy runs behind nbs/13_experiments.ipynb, on the embedded MAE encoder and the Fashion-MNIST
# test split (10,000 images). Each writes <name>.csv (one row per probe and seed) and <name>.json
# (the exact command, wall seconds, threads, the encoder's weights hash, library versions).
# ep_experiment tunes every probe: its learning-rate grid (--blrs default) is chosen on validation with
# the first seed, and the other seeds train at that point. compare and queries reuse the grid points chosen by the
# tuned runs kept in grid_choice/ (--blrs_from; compare_grid and queries_grid search the whole grids again).
# single_lr/ keeps the CSVs of before, with one
# learning rate for every probe (--blrs none). An interrupted run continues when run again: every training
# run checkpoints each epoch under <name>.parts/ until <name>.csv is written.
# From the repository root:  bash nbs/data/scripts/experiments/run.sh [compare|layers|lowshot|queries ...]
set -euo pipefail
cd "$(dirname "$0")/../../experiments"          # the results live in nbs/data/experiments
runs=${*:-compare layers queries lowshot}
for r in $runs; do
  case $r in
    compare) ep_experiment --which compare --out compare.csv --train_size 10000 --seeds 0,1,2 --blrs_from grid_choice/compare.csv ;;  # 9,000 train / 1,000 validation
    compare_grid) ep_experiment --which compare --out grid_choice/compare.csv --train_size 10000 --seeds 0,1,2 ;;  # the whole grid search
    layers)  ep_experiment --which layers  --out layers.csv  --train_size 10000 --seeds 0,1,2 ;;
    lowshot) ep_experiment --which lowshot --out lowshot.csv --seeds 0,1,2 ;;                     # subsets of the 54,000 train / 6,000 validation
    queries) ep_experiment --which queries --out queries.csv --train_size 10000 --seeds 0,1,2 --blrs_from grid_choice/queries.csv ;;
    queries_grid) ep_experiment --which queries --out grid_choice/queries.csv --train_size 10000 --seeds 0,1,2 ;;
    *) echo "unknown run $r: choose from compare layers lowshot queries compare_grid queries_grid"; exit 1 ;;
  esac
done
