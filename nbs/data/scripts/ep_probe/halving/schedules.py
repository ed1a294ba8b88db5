"""Which halving schedules keep `ep_probe`'s choices, replayed on every head's whole validation curve.
A head's curve does not depend on which other heads train beside it (each has its own weights, optimiser state and
BatchNorm; the batches are the same), so a `--halving 0` run's grid.csv tells exactly what any schedule would choose:
at each cut (after epoch c) each probe keeps the better half (rounded up) of its surviving grid points, ranked by best
validation top-1 so far, ties in grid order, as `fit.HalveGrid` does; then the best validation top-1 among every head's
trained epochs is chosen, first of ties. Usage (from the repository root):
  python nbs/data/scripts/ep_probe/halving/schedules.py > nbs/data/ep_probe/halving/schedules.json"""
import json
from pathlib import Path
import pandas as pd

here = Path(__file__).resolve().parents[3]/'ep_probe'/'halving'          # the grids it replays
schedules = [[], [2], [2, 5], [2, 6], [3, 6], [2, 4], [2, 4, 6, 8], [1]]

def replay(g:pd.DataFrame, cuts:list)->tuple: # ({probe: (head, best epoch 1-based, val top-1)}, head-epochs)
    chosen, work = {}, {}
    for probe, d in g.groupby('probe', sort=False):
        heads = list(dict.fromkeys(d['head']))
        curve = {h: d[d['head'] == h].sort_values('epoch').val_top1.tolist() for h in heads}
        epochs = len(curve[heads[0]]); stop, alive = dict.fromkeys(heads, epochs), list(heads)
        for c in cuts:
            ranked = sorted(alive, key=lambda h: -max(curve[h][:c]))     # stable: ties keep the grid's order
            keep = (len(alive) + 1) // 2
            for h in ranked[keep:]: stop[h] = c
            alive = [h for h in alive if h in ranked[:keep]]
        best = max(heads, key=lambda h: (max(curve[h][:stop[h]]), -heads.index(h)))
        top = max(curve[best][:stop[best]])
        chosen[probe] = (best, curve[best].index(top) + 1, round(top, 4))
        work[probe] = sum(stop.values())
    return chosen, work

out = dict(command="python nbs/data/scripts/ep_probe/halving/schedules.py > nbs/data/ep_probe/halving/schedules.json",
           inputs={'default': "grid_default.csv: ep_probe --halving 0 --out h0 (the default job, every head's "
                              "10 epochs)",
                   'full': "grid_full.csv: ep_probe --halving 0 --data fashion_mnist --out hf0 (54,000 train / "
                           "6,000 validation / 10,000 test images)",
                   'results': "results_default_halving0.csv, results_full_halving0.csv: those two runs' chosen heads "
                              "with their test top-1; results_default.csv: ep_probe --out o (the default job with its "
                              "default halving) on the same machine"},
           machine="2-core Intel Xeon with avx512_bf16 and AMX (bf16 tokens and heads), 2026-12-06",
           schedules={})
for name in ('default', 'full'):
    g = pd.read_csv(here/f'grid_{name}.csv')
    none, _ = replay(g, [])
    now, _ = replay(g, [2])
    for cuts in schedules:
        chosen, work = replay(g, cuts)
        out['schedules'].setdefault(','.join(map(str, cuts)) or 'none', {})[name] = dict(
            chosen={p: list(v) for p, v in chosen.items()}, head_epochs=work,
            differs_from_no_halving=sorted(p for p in chosen if chosen[p][:2] != none[p][:2]),
            differs_from_default_cut_2=sorted(p for p in chosen if chosen[p][:2] != now[p][:2]))
print(json.dumps(out, indent=1))
