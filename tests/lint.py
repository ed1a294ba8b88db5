"""Lint of the package and the tests, as the README's test command runs it:
  python tests/lint.py
ruff's pyflakes rules (F: unused imports and variables, undefined names, redefinitions) over ep_probing/ and tests/,
and lines of at most 120 characters in ep_probing/ (E501; the generated `_modidx.py` is skipped). Fix findings in the
notebooks (nbs/), then run nbdev_export: the modules are generated. nbdev wraps `__all__` at 120 columns before it
prefixes `__all__ = `, so its first line can run over: the notebooks then export one cell with `exporti` and name its
names in `_all_` (see the last export cell of nbs/10a_stats.ipynb)."""
import subprocess, sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]


def ruff(*args)->int:
    r = subprocess.run([sys.executable, '-m', 'ruff', 'check', '--output-format', 'concise', *args], cwd=root)
    return r.returncode


if __name__ == '__main__':
    rc = ruff('--select', 'F,E501', '--line-length', '120', '--exclude', 'ep_probing/_modidx.py', 'ep_probing')
    rc = ruff('--select', 'F', 'tests') or rc
    sys.exit(rc)
