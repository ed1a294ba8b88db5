"""The fast default protocol against the paper's recipe (issue 41 point 4), from the runs' per-image files only.

From the repository root, with `export PYTHONPATH=$PWD`:
  python nbs/data/scripts/protocol_compare.py --default RUN --paper RUN [--also NAME=RUN ...] --out nbs/data/protocol
Each RUN is a finished run folder: `results.json` (each probe's chosen head, its test top-1 and per-image
correctness `test_correct`), and for the selection table `test_curve.jsonl` (protocol_run.py: every head's test
correctness after every epoch). Writes into `--out`:
- `compare.csv`: per probe, the default's and the paper recipe's test top-1, paper minus default in points with a
  paired bootstrap 95% interval over the test images (`stats.paired_bootstrap`), and each protocol's rank;
- `selection.csv`: per run and probe, the test top-1 of the held-out choice (grid point and epoch chosen on
  validation: what the run reports), of the same head at its best TEST epoch, and of the best head and epoch on
  TEST (the paper code's practice), each inflation in points with its paired interval;
- `compare.md`: both tables as text.
With `--copy`, each run of `--paper`/`--also` is first copied into `--out/NAME` (`slim`: results.json, meta.json,
grid.csv, the test curve's top-1 per head and epoch, and the per-image rows the selection reads), and the tables
are built from the copies, so that the committed tables can be rebuilt from the committed files."""
import argparse, json
from pathlib import Path
import numpy as np, pandas as pd
from ep_probing.stats import unpack_correct, paired_bootstrap

names = dict(lp='LP [CLS]', gap='GAP', ep='EP_32', mhca='MHCA')          # the project's display names


def load_results(folder)->dict:
    "`{probe: {'top1', 'head', 'best_epoch', 'correct'}}` from a run's results.json (top-1 from the per-image bits)"
    rows, out = json.loads((Path(folder)/'results.json').read_text()), {}
    for r in rows:
        c = unpack_correct(r['test_correct'], int(r['n_test']))
        if abs(c.mean() - r['test_top1']) > 1e-9:
            raise ValueError(f"{folder}: {r['probe']}'s test_top1 {r['test_top1']} is not its per-image mean "
                             f"{c.mean()}")
        out[r['probe']] = dict(top1=100 * c.mean(), head=r['head'], best_epoch=int(r['best_epoch']), correct=c)
    return out


def _ranks(top1:dict)->dict: return {p: i + 1 for i, p in enumerate(sorted(top1, key=lambda p: -top1[p]))}


def protocol_table(default:dict, paper:dict, # load_results of the two runs, tested on the same images
                   n_boot:int=10_000, seed:int=0)->pd.DataFrame:
    "Per probe both protocols: top-1, paper minus default with its paired interval, and each protocol's rank"
    probes = [p for p in default if p in paper]
    if not probes: raise ValueError("the two runs share no probe")
    for p in probes:
        if len(default[p]['correct']) != len(paper[p]['correct']):
            raise ValueError(f"{p}: the runs were tested on {len(default[p]['correct'])} and "
                             f"{len(paper[p]['correct'])} images; compare runs on the same test images")
    rd, rp = _ranks({p: default[p]['top1'] for p in probes}), _ranks({p: paper[p]['top1'] for p in probes})
    rows = [dict(probe=p, default_top1=default[p]['top1'], paper_top1=paper[p]['top1'],
                 **paired_bootstrap(paper[p]['correct'], default[p]['correct'], n_boot=n_boot, seed=seed),
                 default_rank=rd[p], paper_rank=rp[p]) for p in probes]
    return pd.DataFrame(rows).set_index('probe')


def read_curve(folder)->pd.DataFrame:
    "The test curve, the last row of each (epoch, head): test_curve.jsonl, or the slim copy `slim` writes"
    f = Path(folder)
    if (f/'test_curve.jsonl').is_file():
        rows = [json.loads(l) for l in (f/'test_curve.jsonl').read_text().splitlines() if l.strip()]
        return pd.DataFrame(rows).drop_duplicates(['epoch', 'head'], keep='last').reset_index(drop=True)
    cur = pd.read_csv(f/'test_curve.csv')                               # every row's top-1, in the same order
    bits = {(r['epoch'], r['head']): r['correct'] for r in map(json.loads, (f/'test_curve_bits.jsonl').open())}
    cur['correct'] = [bits.get(k) for k in zip(cur.epoch, cur['head'])]
    return cur


def slim(folder, dest)->Path:
    "Copy a run's results.json, meta.json and grid.csv, and its test curve with only the per-image rows selected"
    src, dest = Path(folder), Path(dest); dest.mkdir(parents=True, exist_ok=True)
    for n in ('results.json', 'meta.json', 'grid.csv'):
        if (src/n).is_file(): (dest/n).write_bytes((src/n).read_bytes())
    cur, sel = read_curve(src), selection_table(src, n_boot=10)
    keep = {(int(e), h) for p, r in sel.iterrows() for e, h in ((r.heldout_epoch, r.heldout_head),
                                                              (r.test_epoch, r.heldout_head),
                                                              (r.test_head_epoch, r.test_head))}
    cur.drop(columns='correct').to_csv(dest/'test_curve.csv', index=False)
    with open(dest/'test_curve_bits.jsonl', 'w') as f:
        for r in cur.itertuples():
            if (int(r.epoch), r.head) in keep:
                f.write(json.dumps(dict(epoch=int(r.epoch), head=r.head, correct=r.correct)) + '\n')
    return dest


def _has(b)->bool: return isinstance(b, np.ndarray)


def selection_table(folder, n_boot:int=10_000, seed:int=0)->pd.DataFrame:
    "Per probe: the held-out choice's test top-1, and how much choosing the epoch (or head and epoch) on TEST adds"
    res, cur = load_results(folder), read_curve(folder)
    cur['bits'] = [unpack_correct(s, int(n)) if isinstance(s, str) else None for s, n in zip(cur.correct, cur.n_test)]
    rows = []
    for p, r in res.items():
        mine = cur[(cur['head'] == r['head']) & (cur.epoch == r['best_epoch'])]
        if len(mine) != 1 or not _has(mine.bits.iloc[0]) or not np.array_equal(mine.bits.iloc[0], r['correct']):
            raise ValueError(f"{folder}: {p}'s chosen head {r['head']} at epoch {r['best_epoch']} is not in "
                             "test_curve.jsonl with the same per-image results")
        g = cur[cur.probe == p]
        ep = g[g['head'] == r['head']].loc[lambda d: d.test_top1.idxmax()]     # ties: the earliest best epoch
        anyh = g.loc[g.test_top1.idxmax()]
        if not (_has(ep.bits) and _has(anyh.bits)): raise ValueError(f"{folder}: the test curve lacks the per-image "
                                                                  f"results of a row {p}'s selection reads")
        e_ci = paired_bootstrap(ep.bits, r['correct'], n_boot=n_boot, seed=seed)
        a_ci = paired_bootstrap(anyh.bits, r['correct'], n_boot=n_boot, seed=seed)
        rows.append(dict(probe=p, heldout_top1=r['top1'], heldout_head=r['head'], heldout_epoch=r['best_epoch'],
                         test_epoch=int(ep.epoch), test_epoch_top1=100 * ep.test_top1,
                         epoch_gain=e_ci['diff'], epoch_gain_lo=e_ci['lo'], epoch_gain_hi=e_ci['hi'],
                         test_head=anyh['head'], test_head_epoch=int(anyh.epoch), test_head_top1=100 * anyh.test_top1,
                         head_gain=a_ci['diff'], head_gain_lo=a_ci['lo'], head_gain_hi=a_ci['hi'],
                         epochs=int(cur.epoch.max()) + 1))
    return pd.DataFrame(rows).set_index('probe')


def ci(d, lo, hi)->str: return f"{d:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def md_table(df:pd.DataFrame)->str:
    "A frame of strings as a markdown table (no tabulate needed)"
    rows = [list(df.columns), ['---'] * len(df.columns), *df.astype(str).values.tolist()]
    return '\n'.join('| ' + ' | '.join(map(str, r)) + ' |' for r in rows)


def markdown(t:pd.DataFrame, sel:pd.DataFrame)->str:
    "Both tables as text: the protocols side by side, then the selection inflation"
    a = pd.DataFrame({'probe': [names.get(p, p) for p in t.index], 'default top-1': t.default_top1.map('{:.2f}'.format),
                      'paper-recipe top-1': t.paper_top1.map('{:.2f}'.format),
                      'paper - default [95% CI]': [ci(*r) for r in t[['diff', 'lo', 'hi']].values],
                      'rank default / paper': [f"{a} / {b}" for a, b in zip(t.default_rank, t.paper_rank)]})
    b = pd.DataFrame({'run': sel.index.get_level_values(0), 'probe': [names.get(p, p) for p in sel.probe],
                      'held-out top-1': sel.heldout_top1.map('{:.2f}'.format),
                      'best test epoch': [f"{e + 1} of {n}" for e, n in zip(sel.test_epoch, sel.epochs)],
                      'epoch on test: gain [95% CI]': [ci(*r) for r in sel[['epoch_gain', 'epoch_gain_lo',
                                                                             'epoch_gain_hi']].values],
                      'grid point and epoch on test: gain [95% CI]': [ci(*r) for r in sel[['head_gain', 'head_gain_lo',
                                                                                            'head_gain_hi']].values]})
    return md_table(a) + '\n\n' + md_table(b) + '\n'


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--default', required=True)
    ap.add_argument('--paper', required=True)
    ap.add_argument('--also', nargs='*', default=[])          # NAME=RUN: further runs with a test curve
    ap.add_argument('--out', required=True)
    ap.add_argument('--copy', action='store_true')          # slim copies of the runs into --out/NAME (then read)
    a = ap.parse_args()
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    runs = {'paper': a.paper, **dict(s.split('=', 1) for s in a.also)}
    if a.copy: runs = {k: str(slim(v, out/k)) for k, v in runs.items()}
    t = protocol_table(load_results(a.default), load_results(runs['paper']))
    sel = pd.concat({k: selection_table(v).reset_index() for k, v in runs.items()}, names=['run', 'row'])
    sel = sel.reset_index(level='row', drop=True)
    t.to_csv(out/'compare.csv', float_format='%.4f')
    sel.to_csv(out/'selection.csv', float_format='%.4f')
    md = markdown(t, sel); (out/'compare.md').write_text(md)
    print(md)
