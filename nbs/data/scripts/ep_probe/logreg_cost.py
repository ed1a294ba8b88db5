"""The cost of the logistic-regression baseline on the default `ep_probe` job's cached tokens (the embedded MAE
encoder, the Fashion-MNIST sample: 9,000 training, 1,000 validation, 10,000 test images), and its test top-1 against
the committed run's probes with paired 95% intervals. Prints a JSON summary.
Usage (from the repository root):
  python nbs/data/scripts/ep_probe/logreg_cost.py CACHE_DIR [repeats=1] [kinds=cls,gap]
CACHE_DIR holds (or gets) the default job's tokens (`ep_probe --cache_dir CACHE_DIR`): the same keys, so a cache that
`ep_probe` filled is reused."""
import json, sys, time
import numpy as np, pandas as pd
from pathlib import Path
from ep_probing.prepare import Prepared
from ep_probing.logreg import logreg_eval
from ep_probing.stats import compare_table, pack_correct, unpack_correct
from ep_probing.knn import cache_global_features

cache, repeats = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1
kinds = sys.argv[3].split(',') if len(sys.argv) > 3 else ['cls', 'gap']
p = Prepared(cache_dir=cache, progress=False)
c_tr, c_te, rows = p.train_cache, p.test_cache, p.train_rows
va = np.setdiff1d(np.arange(len(c_tr)), rows)                 # the run's validation rows of the train cache
layer = p.layers[-1]
out = {}
for kind in kinds:
    t = time.perf_counter(); [cache_global_features(c, r, layer, kind) for c, r in
                              ((c_tr, rows), (c_tr, va), (c_te, np.arange(len(c_te))))]
    read_s = time.perf_counter() - t
    runs = [logreg_eval(c_tr, c_te, rows, va, layer, kinds=(kind,))[kind] for _ in range(repeats)]
    r = runs[-1]
    out[kind] = dict(top1=r['top1'], val_top1=r['val_top1'], C=r['C'], params=r['params'],
                     sweep_s=[round(x['fit_s'], 2) for x in runs], features_read_s=round(read_s, 2),
                     sweep={f"{c:g}": dict(val_top1=v, fit_s=round(s, 3))
                            for c, v, s in zip(r['sweep'].index, r['sweep'].val_top1, r['sweep'].fit_s)})
    out[kind]['correct'] = r['correct']
res = pd.DataFrame(json.loads(Path('nbs/data/ep_probe/results.json').read_text())).set_index('probe')
correct = {k: unpack_correct(s, int(n)) for k, s, n in zip(res.index, res.test_correct, res.n_test)}
for kind in out: correct[f'logreg_{kind}'] = out[kind].pop('correct')
vs = {ref: compare_table(correct, ref)[['diff', 'lo', 'hi']].round(2).to_dict('index') for ref in ('ep', 'lp')}
for kind in out: out[kind]['test_correct'] = pack_correct(correct[f'logreg_{kind}'])
print(json.dumps(dict(n_train=len(rows), n_valid=len(va), n_test=len(c_te), layer=layer, logreg=out,
                      probes_train_s=float(res.train_s.iloc[0]), paired_vs=vs), indent=1, default=float))
