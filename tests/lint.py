"""Lint of the package and the tests, as the README's test command runs it:
  python tests/lint.py
- ruff's pyflakes rules (F: unused imports and variables, undefined names, redefinitions) over ep_probing/ and tests/;
- lines of at most 120 characters in ep_probing/, except the `__all__` statement that nbdev writes (it wraps the names
  at 120 and then prefixes the first line with `__all__ = `). The generated `_modidx.py` is skipped.
Fix findings in the notebooks (nbs/), then run nbdev_export: the modules are generated."""
import re, subprocess, sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
MAX = 120


def long_lines(f:Path)->list:
    "`(line number, length)` of the lines of `f` over `MAX`, outside nbdev's `__all__` statement"
    out, in_all = [], False
    for i, l in enumerate(f.read_text().splitlines(), 1):
        if l.startswith('__all__ = ['): in_all = True
        if len(l) > MAX and not in_all: out.append((i, len(l)))
        if in_all and l.rstrip().endswith(']'): in_all = False
    return out


def main()->int:
    r = subprocess.run([sys.executable, '-m', 'ruff', 'check', '--select', 'F', '--output-format', 'concise',
                        '--exclude', 'ep_probing/_modidx.py', 'ep_probing', 'tests'], cwd=root, capture_output=True, text=True)
    if r.returncode not in (0, 1): print(r.stdout + r.stderr); return 1
    found = [l for l in r.stdout.splitlines() if re.match(r'\S+\.py:\d+:\d+: ', l)]
    for f in sorted((root/'ep_probing').glob('*.py')):
        if f.name == '_modidx.py': continue
        found += [f"{f.relative_to(root)}:{i}: line of {n} characters (at most {MAX})" for i, n in long_lines(f)]
    for l in found: print(l)
    print(f"lint: {len(found)} finding(s) (ruff pyflakes over ep_probing/ and tests/; lines <= {MAX} in ep_probing/)")
    return 1 if found else 0


if __name__ == '__main__': sys.exit(main())
