"`ep_probing.stats`: paired bootstrap, McNemar's exact test, packed correctness, object masks, attention on the object."
import json, math, tracemalloc
import numpy as np, torch, pytest
from ep_probing.stats import (pack_correct, unpack_correct, paired_bootstrap, mean_ci, mcnemar_exact, compare_line,
                              compare_table, object_mask, attention_on_object, pointing)

def table(n01, n10, n11=0, n00=0):
    "Correctness of A and B from the four cells of McNemar's table"
    a = np.array([0] * n01 + [1] * n10 + [1] * n11 + [0] * n00, bool)
    b = np.array([1] * n01 + [0] * n10 + [1] * n11 + [0] * n00, bool)
    return a, b

def test_pack_round_trip_in_json():
    for n in (0, 1, 7, 8, 9, 10_000):
        c = np.random.default_rng(n).random(n) < 0.7
        s = json.loads(json.dumps({'correct': pack_correct(c)}))['correct']
        assert np.array_equal(unpack_correct(s, n), c) and unpack_correct(s, n).dtype == bool
    assert len(pack_correct(np.ones(10_000, bool))) < 1700                        # ~1.7 KB for 10,000 images
    assert np.array_equal(unpack_correct(pack_correct(torch.tensor([1, 0, 1])), 3), [True, False, True])
    with pytest.raises(ValueError, match='not n=17'): unpack_correct(pack_correct(np.ones(8)), 17)
    with pytest.raises(ValueError, match='pack each seed apart'): pack_correct(np.ones((3, 8)))

def test_bootstrap_all_right_vs_all_wrong():
    assert paired_bootstrap(np.ones(1000), np.zeros(1000), n_boot=500) == dict(diff=100.0, lo=100.0, hi=100.0)
    assert paired_bootstrap(np.zeros(1000), np.ones(1000), n_boot=500) == dict(diff=-100.0, lo=-100.0, hi=-100.0)

def test_bootstrap_covers_truth_and_shrinks():
    "True difference 5 points; four times the images halve the width"
    width = {}
    for n in (1000, 4000, 16000):
        g = np.random.default_rng(n)
        a, b = g.random(n) < 0.80, g.random(n) < 0.75
        r = paired_bootstrap(a, b, n_boot=2000, seed=1)
        assert r['lo'] < 5 < r['hi'], (n, r)
        assert r['diff'] == pytest.approx(100 * (a.mean() - b.mean()))
        width[n] = r['hi'] - r['lo']
    assert width[1000] / width[4000] == pytest.approx(2, abs=0.25)
    assert width[4000] / width[16000] == pytest.approx(2, abs=0.25)

def test_bootstrap_seeds_deterministic_and_paired():
    g = np.random.default_rng(0)
    a, b = g.random((3, 500)) < 0.8, g.random(500) < 0.7
    r = paired_bootstrap(a, b, n_boot=1000, seed=3)
    assert r == paired_bootstrap(a, b, n_boot=1000, seed=3)                       # deterministic given the seed
    assert r != paired_bootstrap(a, b, n_boot=1000, seed=4)
    assert r['diff'] == pytest.approx(100 * (a.mean() - b.mean()))               # top-1 averaged over seeds
    assert paired_bootstrap(a, b, n_boot=1000, seed=3) == paired_bootstrap(a.astype(float).mean(0), b, 1000, seed=3)
    r90 = paired_bootstrap(a, b, n_boot=1000, ci=0.9, seed=3)
    assert r['lo'] < r90['lo'] < r90['hi'] < r['hi']
    with pytest.raises(ValueError, match='same test images'): paired_bootstrap(a, b[:-1])
    with pytest.raises(ValueError, match='ci=1.5'): paired_bootstrap(a, b, ci=1.5)

def test_bootstrap_10k_by_10k_memory():
    "10,000 resamples of 10,000 images stay within a few tens of MB"
    g = np.random.default_rng(0)
    a, b = g.random(10_000) < 0.9, g.random(10_000) < 0.9
    tracemalloc.start()
    try:
        paired_bootstrap(a, b)
        peak = tracemalloc.get_traced_memory()[1]
    finally: tracemalloc.stop()
    assert peak < 200e6, peak

def test_binomial_tail_exact():
    "The integer recurrence equals the sum of `math.comb` terms, exactly"
    from ep_probing.stats import _binom_cdf_half
    for k, n in [(0, 0), (0, 1), (2, 10), (5, 5), (40, 100), (333, 1000)]:
        assert _binom_cdf_half(k, n) == sum(math.comb(n, i) for i in range(k + 1)) / 2**n

def test_mcnemar_hand_table():
    a, b = table(2, 8, 60, 30)
    assert mcnemar_exact(a, b) == dict(n01=2, n10=8, p=0.109375)                  # 2 (1 + 10 + 45) / 1024
    assert mcnemar_exact(*table(0, 0, 5, 5))['p'] == 1.0                          # no disagreement
    assert mcnemar_exact(*table(4, 4))['p'] == 1.0
    assert mcnemar_exact(*table(0, 5))['p'] == 2 / 32
    assert mcnemar_exact(np.stack([a, ~a]), b) == mcnemar_exact(a, b)             # first seed only
    assert mcnemar_exact(*table(3000, 3400))['p'] == pytest.approx(
        math.erfc(399 / 2 / math.sqrt(6400 / 4) / math.sqrt(2)), rel=0.02)         # normal approximation, large counts

@pytest.mark.parametrize('n01,n10', [(2, 8), (0, 7), (13, 30), (50, 50), (120, 80)])
def test_mcnemar_matches_scipy(n01, n10):
    stats = pytest.importorskip('scipy.stats')
    assert mcnemar_exact(*table(n01, n10, 10))['p'] == pytest.approx(stats.binomtest(n01, n01 + n10, 0.5).pvalue)

def test_compare_line_and_table():
    a, b = table(2, 8, 60, 30)
    assert compare_line('EP', 'AIM', np.ones(50), np.zeros(50), n_boot=100).endswith(': EP better')
    assert compare_line('EP', 'AIM', a, a) == \
        "EP vs AIM: +0.00 points [+0.00, +0.00], McNemar p = 1: no detectable difference"
    assert compare_line('EP', 'AIM', a, b, n_boot=1000).startswith('EP vs AIM: +6.00 points [')
    tab = compare_table({'EP': a, 'AIM': b, 'bad': np.zeros(100)}, 'AIM', n_boot=500)
    assert list(tab.index) == ['EP', 'bad'] and tab.loc['bad', 'verdict'] == 'AIM better'
    assert tab.loc['EP', 'n10'] == 8 and tab.loc['EP', 'p'] == 0.109375 and tab.loc['EP', 'top1'] == 68
    with pytest.raises(ValueError, match="ref='MAE'"): compare_table({'EP': a}, 'MAE')

def test_object_mask_rectangle():
    "A bright rectangle on black: exactly the patches it covers at >= min_frac"
    img = np.zeros((32, 48), np.float32); img[5:19, 10:31] = 1.0                  # rows 5-18, cols 10-30
    cover = lambda lo, hi, p, k: max(0, min(hi, (k + 1) * p) - max(lo, k * p)) / p   # share of patch k's span covered
    for min_frac in (0.1, 0.25, 0.5, 0.9):
        m = object_mask(img, (4, 6), thresh=0.5, min_frac=min_frac)
        exp = torch.tensor([[cover(5, 19, 8, i) * cover(10, 31, 8, j) >= min_frac for j in range(6)] for i in range(4)])
        assert m.shape == (1, 24) and torch.equal(m[0].reshape(4, 6), exp), min_frac
    assert object_mask(np.zeros((3, 32, 48)), (4, 6)).sum() == 0
    with pytest.raises(ValueError, match='multiple of the grid'): object_mask(img, (5, 6))
    with pytest.raises(ValueError, match=r'\(B, H, W\)'): object_mask(np.zeros((1, 3, 32, 48)), (4, 6))

def test_attention_on_object_and_pointing():
    mask = torch.tensor([[1, 1, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, 1, 1]], dtype=torch.bool)   # (2, 8)
    on = mask[:, None].float().expand(2, 3, 8) / mask.sum(1)[:, None, None]                          # all on the object
    uniform = torch.full((2, 3, 8), 1 / 8)
    assert torch.allclose(attention_on_object(on, mask), torch.ones(2, 3))
    assert torch.allclose(attention_on_object(uniform, mask), torch.tensor([[0.25] * 3, [0.5] * 3]))
    half = torch.zeros(2, 1, 8); half[0, 0, [0, 7]] = 0.5; half[1, 0, [0, 7]] = 0.5
    assert torch.allclose(attention_on_object(half, mask), torch.tensor([[0.5], [0.5]]))
    peak = torch.full((2, 2, 8), 0.02); peak[:, 0, 1] = 0.86; peak[:, 1, 6] = 0.86
    assert pointing(peak, mask).tolist() == [[True, False], [False, True]]
    assert pointing(on, mask).all()
    with pytest.raises(ValueError, match='drop prefix tokens'): pointing(uniform, mask[:, :7])

def test_mean_ci():
    x = np.random.default_rng(0).uniform(0, 1, 400)
    r = mean_ci(x, n_boot=2000)
    assert r['lo'] < r['mean'] < r['hi'] and r['mean'] == pytest.approx(x.mean())
    assert r['hi'] - r['lo'] == pytest.approx(2 * 1.96 * x.std() / 20, rel=0.15)
    assert mean_ci(torch.tensor(x), n_boot=2000) == r
