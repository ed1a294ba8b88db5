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
