"""The parity table: `compare.py`'s CSV before and after the fixes, side by side with each pooling's cause.
Usage: python tests/parity/table.py nbs/data/parity  (reads parity_before.csv, parity_after.csv, causes.csv there;
writes parity.md there)"""
import csv, sys
from pathlib import Path


def read(path:Path)->dict: return {r['pooling']: r for r in csv.DictReader(open(path))}


def worst_grad(r:dict)->str: return max((r['grad_x_rel'], r['grad_params_rel']), key=float)


def table(d:Path)->str:
    "A markdown table: max relative |delta| of output, logits and gradients before -> after, query grad ratio, cause"
    b, a, c = read(d/'parity_before.csv'), read(d/'parity_after.csv'), read(d/'causes.csv')
    rows = ['| pooling | output | logits | gradients | query grad ratio at init | cause |', '|---|---|---|---|---|---|']
    for n in b:
        q = b[n]['query_grad_ratio_at_init']
        q = f"{q} -> {a[n]['query_grad_ratio_at_init']}" if q else ''
        rows.append(f"| {n} | {b[n]['out_rel']} -> {a[n]['out_rel']} | {b[n]['logits_rel']} -> {a[n]['logits_rel']} "
                    f"| {worst_grad(b[n])} -> {worst_grad(a[n])} | {q} | {c[n]['cause']} |")
    return '\n'.join(rows) + '\n'


if __name__ == '__main__':
    d = Path(sys.argv[1]); (d/'parity.md').write_text(table(d)); print(table(d))
