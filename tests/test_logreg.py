"The logistic-regression baseline against scikit-learn's, and its choice of C on validation only."
import numpy as np, torch
from sklearn.linear_model import LogisticRegression
from ep_probing.logreg import logreg_fit, logreg_sweep

def _data(n=600, c=12, k=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, k, (n,), generator=g)
    x = torch.randn(n, c, generator=g, dtype=torch.float64) * 3 + torch.randn(k, c, generator=g, dtype=torch.float64)[y]
    return x, y

def test_same_probabilities_as_sklearn():
    "At each C, our L-BFGS fit and scikit-learn's give the same class probabilities on unseen data"
    x, y = _data(); xt, _ = _data(seed=1)
    mu, sd = x.mean(0), x.std(0)
    for C in (1e-3, 0.1, 10.):
        sk = LogisticRegression(C=C, max_iter=10000, tol=1e-10).fit(((x - mu) / sd).numpy(), y.numpy())
        ours = logreg_fit(x, y, C, tol=1e-10)
        p = ours.logits(xt).softmax(-1).numpy()
        assert np.abs(p - sk.predict_proba(((xt - mu) / sd).numpy())).max() < 1e-4, C

def test_c_is_chosen_on_validation():
    "The sweep fits every C in ascending order and keeps the one with the best validation top-1"
    x, y = _data(); xv, yv = _data(seed=2)
    sweep, best = logreg_sweep(x, y, xv, yv, Cs=(1e-4, 1e-2, 1.))
    assert best.C == sweep.val_top1.idxmax()
    assert list(sweep.index) == [1e-4, 1e-2, 1.]


# --- the `logreg` row of `ep_probe --logreg`, on a tiny run of the embedded MAE encoder and Fashion-MNIST

def test_ep_probe_logreg_row(tmp_path, monkeypatch, capsys):
    "The row is in the table with a sane top-1 and its interval; its C is the validation argmax of a direct sweep"
    import json, os, sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import console
    from ep_probing.cli import ep_probe
    from ep_probing.config import RunConfig
    from ep_probing.knn import cache_global_features
    from ep_probing.prepare import Prepared
    args = ['--probes', 'lp,ep', '--epochs', 1, '--train_size', 300, '--test_size', 100, '--logreg',
            '--out', tmp_path/'out', '--cache_dir', tmp_path/'cache']
    code, out, err = console.run_cli(ep_probe, monkeypatch, capsys, args)
    assert code == 0, err
    lr = json.loads((tmp_path/'out'/'logreg.json').read_text())
    row = next(line.split() for line in out.splitlines() if line.startswith('logreg '))
    assert row[2] == f"{100 * lr['test_top1']:.2f}", row
    others = [line.split() for line in out.splitlines() if line.startswith(('lp ', 'ep '))]
    # paired with the run's best: an interval on the row, or 'best' there and intervals on the probes' rows
    assert (row[3][0] in '+-' and row[4].startswith('[')) or (row[3] == 'best' and all(o[4].startswith('[')
                                                                                        for o in others)), out
    assert f"C={lr['C']:g}" in row and lr['feature'] == 'cls' and lr['n_test'] == 100, (row, lr)
    assert lr['test_top1'] > 0.4, lr                                                # chance is 0.1
    assert 'logreg: logistic regression (L-BFGS) on the [CLS] token' in out
    # the same split and tokens, swept directly: the C it kept is the best on validation, with the same numbers
    p = Prepared(cfg=RunConfig(train_size=300, test_size=100, cache_dir=str(tmp_path/'cache')), progress=False)
    c, rows = p.train_cache, p.train_rows
    va = np.setdiff1d(np.arange(len(c)), rows)
    f = lambda r: cache_global_features(c, r, p.layers[-1], 'cls')
    y = torch.as_tensor(c.labels)
    sweep, best = logreg_sweep(f(rows), y[rows], f(va), y[va])
    assert best.C == lr['C'] == sweep.val_top1.idxmax()
    assert {f'{k:g}': v for k, v in sweep.val_top1.items()} == lr['sweep']


def test_logreg_is_a_flag():
    "Off by default (the sweep takes minutes on the default job's tokens on a CPU); not part of a run's record"
    from ep_probing.config import RunConfig
    assert RunConfig().logreg is False and 'logreg' not in RunConfig(logreg=True).record()
