#!/usr/bin/env bash
# The whole ep_probing test suite. From a fresh Debian machine with python3 and pip (root for the
# Debian data and Chromium packages), it installs what the tests need, runs every check, and ends with one line:
#   ep_probing test suite: <passed> passed, <failed> failed of <total> checks
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export MPLBACKEND=Agg PYTHONDONTWRITEBYTECODE=1
say() { printf '\n=== %s\n' "$*"; }

say "install"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  pkgs=""
  [ -f /usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz ] || pkgs="$pkgs dataset-fashion-mnist"
  command -v chromium >/dev/null || pkgs="$pkgs chromium"               # the docs check's headless browser
  command -v chromedriver >/dev/null || pkgs="$pkgs chromium-driver"
  if [ -n "$pkgs" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $pkgs || exit 1; fi
fi
if ! $PY -c "import torch, torchvision" 2>/dev/null; then
  # torch and torchvision must come as a matching pair (a lone PyPI torchvision fails to import)
  case "$(uname -m)" in aarch64) pair="torch==2.9.1 torchvision==0.24.1";; *) pair="torch==2.14.1 torchvision==0.29.1";; esac
  $PY -m pip install -q $pair || exit 1
fi
$PY -m pip install -q -e ".[dev,assets]" || { echo "FAILED: pip install -e .[dev,assets]"; exit 1; }
$PY -m pip install -q --no-deps foolbox || exit 1   # only for its 20 real ImageNet photos (tests)

passed=0; failed=0; failures=""
check() { # check "<name>" cmd args...
  local name=$1; shift; say "$name"
  if "$@"; then passed=$((passed+1)); echo "ok: $name"
  else failed=$((failed+1)); failures="$failures; $name"; echo "FAILED: $name"; fi
}
snap() { find "$@" -type f \( -name '*.ipynb' -o -name '*.py' \) -not -path '*/.ipynb_checkpoints/*' | sort | xargs sha1sum; }
unchanged() { # unchanged "<paths>" "<fix>" cmd args...: cmd must not change files under paths
  local paths=$1 fix=$2; shift 2
  local before after; before=$(snap $paths); "$@" || return 1; after=$(snap $paths)
  if [ "$before" != "$after" ]; then diff <(echo "$before") <(echo "$after"); echo "Fix: $fix"; return 1; fi
}
imports() {
  local ok=0 m
  for f in ep_probing/*.py; do m=$(basename "$f" .py); [ "$m" = __init__ ] && m="" || m=".$m"
    $PY -c "import ep_probing$m" || { echo "cannot import ep_probing$m"; ok=1; }; done
  return $ok
}

check "nbdev_clean leaves the notebooks unchanged" unchanged nbs "run nbdev_clean and commit the notebooks" nbdev_clean
check "the export (nbdev_export, __all__ wrapped) leaves the library unchanged" unchanged ep_probing \
  "run python .ci/export.py and commit ep_probing/" $PY .ci/export.py
check "README.md is in sync with nbs/index.ipynb" $PY .ci/readme.py --check
check "every module imports in a fresh interpreter" imports
check "nbdev_test (all notebooks)" nbdev_test
check "lint (ruff pyflakes; lines <= 120 in ep_probing/)" $PY tests/lint.py
check "pytest tests" $PY -m pytest tests -q -p no:cacheprovider
check "docs render (nbdev_proc_nbs, nbconvert, headless Chromium)" $PY .ci/docs_check.py --screenshots out/docs_screenshots

echo
echo "ep_probing test suite: $passed passed, $failed failed of $((passed+failed)) checks${failures:+ (failed:${failures#;})}"
[ "$failed" = 0 ]
