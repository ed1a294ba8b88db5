"""Lint of the package and the tests, as the README's test command runs it:
  python tests/lint.py
ruff's pyflakes rules (F: unused imports and variables, undefined names, redefinitions) over ep_probing/ and tests/,
and lines of at most 120 characters in ep_probing/ (E501; the generated `_modidx.py` is skipped). Fix findings in the
notebooks (nbs/), then run nbdev_export: the modules are generated. nbdev wraps `__all__` at 120 columns before it
prefixes `__all__ = `, so its first line can run over: the notebooks then export one cell with `exporti` and name its
names in `_all_` (see the last export cell of nbs/10a_stats.ipynb). Last, no exported notebook cell (`#| export`,
`#| exporti`) is over 30 lines: split it into prose, one small exported cell and its test, as nbs/00-03 do."""
import json, subprocess, sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
max_cell = 30


def ruff(*args)->int:
    r = subprocess.run([sys.executable, '-m', 'ruff', 'check', '--output-format', 'concise', *args], cwd=root)
    return r.returncode


def long_cells(limit:int=max_cell)->list:
    "`(notebook, cell index, lines)` of every exported cell of nbs/*.ipynb over `limit` lines"
    out = []
    for nb in sorted((root/'nbs').glob('*.ipynb')):
        for i, c in enumerate(json.loads(nb.read_text())['cells']):
            s = ''.join(c['source']).splitlines()
            if c['cell_type'] == 'code' and s and s[0].strip() in ('#| export', '#| exporti') and len(s) > limit:
                out.append((nb.name, i, len(s)))
    return out


if __name__ == '__main__':
    rc = ruff('--select', 'F,E501', '--line-length', '120', '--exclude', 'ep_probing/_modidx.py', 'ep_probing')
    rc = ruff('--select', 'F', 'tests') or rc
    long = long_cells()
    for nb, i, n in long:
        print(f"nbs/{nb}: cell {i} is an exported cell of {n} lines (at most {max_cell}); split it")
    if long: rc = 1
    sys.exit(rc)
