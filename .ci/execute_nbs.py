"""Run notebooks the way `nbdev_test` does and store their outputs, so that the docs pages show them.

    python .ci/execute_nbs.py nbs/11_pipeline.ipynb [more.ipynb ...]

Cells flagged `#| slow` or `#| cuda`, `#| eval: false` cells and the `nbdev_export()` cell are skipped and keep
no output (their figures, where they matter, are committed PNGs). FutureWarnings raised while importing
dependencies are hidden, as in `nbdev_test` logs. Each notebook is then cleaned with `nbdev_clean`.
A notebook whose cell fails is not written; the script prints the error and exits 1.
"""
import os, subprocess, sys, warnings
from pathlib import Path
from execnb.nbio import read_nb, write_nb
from execnb.shell import CaptureShell
from fastcore.xtras import working_directory
from nbdev.process import extract_directives

SKIP = {'slow', 'cuda'}

def skipped(cell)->bool:
    "Is `cell` one that `nbdev_test` would not run?"
    if cell.cell_type != 'code' or 'nbdev_export(' in cell.source: return True
    d = extract_directives(cell, remove=False)
    return d.get('eval:', [''])[0].lower() == 'false' or bool(SKIP & d.keys())

def execute(fn:Path)->bool:
    nb = read_nb(fn)
    for c in nb.cells:
        if c.cell_type == 'code': c.outputs, c.execution_count = [], None     # execnb keeps the old output of a cell that prints nothing
    os.environ['IN_TEST'] = '1'
    sh = CaptureShell(fn)
    sh.run('import warnings; warnings.filterwarnings("ignore", category=FutureWarning)')
    try:
        with working_directory(fn.parent): sh.run_all(nb, exc_stop=True, preproc=skipped)
    except Exception:
        sys.stderr.write(sh.prettytb(fname=fn) + '\n'); return False
    write_nb(nb, fn)
    return True

if __name__ == '__main__':
    ok = True
    for f in sys.argv[1:]:
        r = execute(Path(f).resolve()); ok &= r
        print(f"{'ran' if r else 'FAILED'}: {f}")
    subprocess.run(['nbdev_clean'], check=True)
    sys.exit(0 if ok else 1)
