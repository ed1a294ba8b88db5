#!/usr/bin/env bash
# Run on a machine with pip and the Debian Fashion-MNIST package, before tests/gpu_check.sh runs on a bare GPU machine that
# cannot reach a package registry (its image has torch, timm, pandas... but not fastai, nbdev or the data). Fills DIR
# (default .gpu_carry/, ignored by git) with the wheels it lacks, for its Python, and the Fashion-MNIST train IDX files
# (ep_pretrain's data; ep_probe uses the embedded sample):
#   bash tests/gpu_prepare.sh [DIR]
# then, on the GPU machine, from the repository root with DIR carried along:
#   bash tests/gpu_check.sh --wheels DIR/wheels --data_path DIR/fashion-mnist --out /tmp/gpu --tar "$OUT/gpu.tgz"
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-.gpu_carry}
PYV=${GPU_PYTHON_VERSION:-3.12}                         # the GPU image's python3
DATA=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
# what the GPU image lacks (its package list: /work/.library/device/KINDS.md), at the versions this project pins or tests
# with; not jedi (IPython does without it): the tree that travels to the GPU machine is capped at 64 MiB
PKGS="fastai==2.8.7 fastcore==1.14.5 fastdownload==0.0.8 fastprogress==1.0.3 fasttransform==0.0.2 plum-dispatch==2.10.1 beartype==0.23.1
      nbdev==2.4.14 execnb==0.1.18 ghapi==1.1.1 fastgit==0.1.4 asttokens==3.0.1 astunparse==1.6.3 watchdog==7.1.0
      ipython==8.12.3 backcall==0.2.0 decorator==5.2.1 matplotlib-inline==0.2.2 pexpect==4.8.0
      ptyprocess==0.7.0 pickleshare==0.7.5 prompt-toolkit==3.0.52 wcwidth==0.7.0 stack-data==0.6.3 executing==2.2.1
      pure-eval==0.2.3 traitlets==5.15.0 defusedxml==0.7.1"
mkdir -p "$DIR/wheels" "$DIR/fashion-mnist"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYV" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  -d "$DIR/wheels" $PKGS
cp "$DATA"/train-{images-idx3,labels-idx1}-ubyte.gz "$DIR/fashion-mnist/"
tree=$(git ls-files -z | xargs -0 cat | wc -c); carry=$(du -sb "$DIR" | cut -f1)
echo "travels: $((tree / 1048576)) MiB of tracked files + $((carry / 1048576)) MiB in $DIR (the device tool's cap: 64 MiB)"
[ $((tree + carry)) -lt $((62 * 1048576)) ] || echo "gpu_prepare.sh: warning: near or over the 64 MiB cap; leave out the largest wheels or the data" >&2
echo "gpu_prepare.sh: $(ls "$DIR/wheels" | wc -l) wheels and the Fashion-MNIST train files in $DIR (carry it to the GPU machine)"
