"""Lint of the package and the tests, as the README's test command runs it:
  python tests/lint.py
ruff's pyflakes rules (F: unused imports and variables, undefined names, redefinitions) over ep_probing/ and tests/,
and lines of at most 120 characters in ep_probing/ (E501). Fix findings in the notebooks (nbs/), then run
`python .ci/export.py` (nbdev_export, with each `__all__` wrapped within 120 columns): the modules are generated.
The generated `_modidx.py` is not linted for length. Last, no exported notebook cell (`#| export`, `#| exporti`) is over 30 lines: split it into prose, one
small exported cell and its test, as nbs/00-03 do. The fields of a dataclass (`name:type=default # comment`, one
per line) do not count: they are a table, one option per line, however many options there are. The scripts behind
the committed results (nbs/data/scripts/) get ruff's F and E501 (120) as well."""
import json, re, subprocess, sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
max_cell = 30
scripts = 'nbs/data/scripts'                       # the scripts that made the results under nbs/data


def ruff(*args)->int:
    r = subprocess.run([sys.executable, '-m', 'ruff', 'check', '--output-format', 'concise', *args], cwd=root)
    return r.returncode


def long_lines(folder:str='ep_probing', limit:int=120)->list:
    "ruff's E501 findings in `folder` (concise lines)"
    r = subprocess.run([sys.executable, '-m', 'ruff', 'check', '--output-format', 'concise', '--select', 'E501',
                        '--line-length', str(limit), '--exclude', f'{folder}/_modidx.py', folder],
                       cwd=root, capture_output=True, text=True)
    return [l for l in r.stdout.splitlines() if re.match(r'.+?:\d+:\d+: E501', l)]


def script_findings(folder:str=scripts, limit:int=120)->list:
    "ruff's F and E501 findings (concise lines) in the scripts under `folder`"
    r = subprocess.run([sys.executable, '-m', 'ruff', 'check', '--output-format', 'concise', '--select', 'F,E501',
                        '--line-length', str(limit), folder], cwd=root, capture_output=True, text=True)
    return [l for l in r.stdout.splitlines() if re.match(r'.+?:\d+:\d+: [A-Z]+\d+', l)]


field = re.compile(r'^    \w+\s*:\s*[^=#]+=[^#]*#')      # `    name:type=default # comment`, in a class body


def code_lines(src:str)->int:
    "Lines of a cell's source that count toward the cap: all but a dataclass's documented fields"
    return sum(not field.match(l) for l in src.splitlines())


def long_cells(limit:int=max_cell)->list:
    "`(notebook, cell index, lines)` of every exported cell of nbs/*.ipynb over `limit` counted lines"
    out = []
    for nb in sorted((root/'nbs').glob('*.ipynb')):
        for i, c in enumerate(json.loads(nb.read_text())['cells']):
            s = ''.join(c['source']).splitlines()
            n = code_lines(''.join(c['source']))
            if c['cell_type'] == 'code' and s and s[0].strip() in ('#| export', '#| exporti') and n > limit:
                out.append((nb.name, i, n))
    return out


if __name__ == '__main__':
    rc = ruff('--select', 'F', '--exclude', 'ep_probing/_modidx.py', 'ep_probing')
    long = long_lines()
    print(*long, sep='\n') if long else None
    if long: rc = 1
    rc = ruff('--select', 'F', 'tests') or rc
    found = script_findings()
    print(*found, sep='\n') if found else None
    if found: rc = 1
    long = long_cells()
    for nb, i, n in long:
        print(f"nbs/{nb}: cell {i} is an exported cell of {n} lines (at most {max_cell}); split it")
    if long: rc = 1
    sys.exit(rc)
