"""The protocol comparison (nbs/data/scripts/protocol_*.py) is built from the per-image files it names, and the
per-epoch test curve its run records holds what the run's own final test evaluation gives."""
import importlib.util, json
from pathlib import Path
import numpy as np, pytest, torch
from fastai.data.core import DataLoaders
from ep_probing.stats import pack_correct, paired_bootstrap
from ep_probing.fit import fit_probes, probe_learner

scripts = Path(__file__).parents[1]/'nbs'/'data'/'scripts'

def _load(name):
    spec = importlib.util.spec_from_file_location(name, scripts/f'{name}.py')
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

cmp_ = _load('protocol_compare')

def _run(folder:Path, bits:dict, heads:dict=None, epochs:dict=None)->Path:
    "A run folder whose results.json holds `bits[probe]` as each probe's per-image test correctness"
    folder.mkdir(parents=True)
    rows = [dict(probe=p, head=(heads or {}).get(p, f'{p}_blr=0.1'), best_epoch=(epochs or {}).get(p, 0),
                 test_top1=float(b.mean()), n_test=len(b), test_correct=pack_correct(b)) for p, b in bits.items()]
    (folder/'results.json').write_text(json.dumps(rows))
    return folder

def _bits(rng, n, p): return rng.random(n) < p

def test_protocol_table_is_built_from_the_per_image_files(tmp_path):
    rng, n = np.random.default_rng(0), 400
    d = {'lp': _bits(rng, n, .6), 'ep': _bits(rng, n, .8), 'mhca': _bits(rng, n, .7)}
    p = {'lp': _bits(rng, n, .7), 'ep': _bits(rng, n, .65), 'mhca': _bits(rng, n, .75)}
    t = cmp_.protocol_table(cmp_.load_results(_run(tmp_path/'d', d)), cmp_.load_results(_run(tmp_path/'p', p)),
                            n_boot=500)
    for k in d:
        assert t.loc[k, 'default_top1'] == pytest.approx(100 * d[k].mean())
        assert t.loc[k, 'paper_top1'] == pytest.approx(100 * p[k].mean())
        r = paired_bootstrap(p[k], d[k], n_boot=500)                  # paper minus default, paired over the images
        assert (t.loc[k, 'diff'], t.loc[k, 'lo'], t.loc[k, 'hi']) == pytest.approx((r['diff'], r['lo'], r['hi']))
    order = lambda bits: sorted(bits, key=lambda k: -bits[k].mean())
    assert sorted(t.index, key=lambda k: t.loc[k, 'default_rank']) == order(d)
    assert sorted(t.index, key=lambda k: t.loc[k, 'paper_rank']) == order(p)

def test_a_claimed_top1_that_is_not_its_per_image_files_fails(tmp_path):
    f = _run(tmp_path/'d', {'lp': np.array([1, 0, 1, 1], bool)})
    rows = json.loads((f/'results.json').read_text()); rows[0]['test_top1'] = 0.5
    (f/'results.json').write_text(json.dumps(rows))
    with pytest.raises(ValueError, match="not its per-image mean"): cmp_.load_results(f)

def test_runs_on_different_test_images_are_not_compared(tmp_path):
    a = cmp_.load_results(_run(tmp_path/'a', {'lp': np.ones(8, bool)}))
    b = cmp_.load_results(_run(tmp_path/'b', {'lp': np.ones(9, bool)}))
    with pytest.raises(ValueError, match="same test images"): cmp_.protocol_table(a, b, n_boot=10)

def _curve(folder:Path, rows:list):
    with open(folder/'test_curve.jsonl', 'a') as f:
        for e, h, b in rows:
            f.write(json.dumps(dict(epoch=e, probe=h.split('_')[0], head=h, test_top1=float(b.mean()), n_test=len(b),
                                    correct=pack_correct(b))) + '\n')

def test_selection_table_reads_the_test_curve(tmp_path):
    rng, n = np.random.default_rng(1), 300
    c = {(e, h): _bits(rng, n, q) for e, q in enumerate((.5, .7, .6)) for h in ('lp_blr=0.1', 'lp_blr=1.0')}
    c[1, 'lp_blr=1.0'] = _bits(rng, n, .9)                          # the other grid point peaks on test
    f = _run(tmp_path/'r', {'lp': c[2, 'lp_blr=0.1']}, heads={'lp': 'lp_blr=0.1'}, epochs={'lp': 2})
    _curve(f, [(e, h, np.zeros(n, bool)) for (e, h) in c])         # an interrupted epoch, run again on resume:
    _curve(f, [(e, h, b) for (e, h), b in c.items()])               # the last row of an (epoch, head) wins
    s = cmp_.selection_table(f, n_boot=500).loc['lp']
    held = c[2, 'lp_blr=0.1']
    e_best = max(range(3), key=lambda e: c[e, 'lp_blr=0.1'].mean())
    assert s.heldout_top1 == pytest.approx(100 * held.mean()) and s.test_epoch == e_best
    assert s.epoch_gain == pytest.approx(paired_bootstrap(c[e_best, 'lp_blr=0.1'], held, n_boot=500)['diff'])
    assert (s.test_head, s.test_head_epoch) == ('lp_blr=1.0', 1)
    assert s.head_gain == pytest.approx(100 * (c[1, 'lp_blr=1.0'].mean() - held.mean()))

def test_selection_table_refuses_a_curve_without_the_reported_head(tmp_path):
    b = np.ones(10, bool)
    f = _run(tmp_path/'r', {'lp': b}, heads={'lp': 'lp_blr=0.1'}, epochs={'lp': 1})
    _curve(f, [(0, 'lp_blr=0.1', b)])                               # epoch 1 is missing
    with pytest.raises(ValueError, match="not in test_curve.jsonl"): cmp_.selection_table(f, n_boot=10)

def _tokens(n, seed, N=16, C=16):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    patch = torch.randn(n, 1, N, C, generator=g); patch[torch.arange(n), :, 0, :3] += 3 * torch.eye(3)[y][:, None]
    return list(zip(patch, torch.randn(n, 1, 1, C, generator=g), y))

def test_test_curve_matches_the_runs_final_test_evaluation(tmp_path):
    run = _load('protocol_run')
    dls = DataLoaders.from_dsets(_tokens(96, 0), _tokens(48, 1), bs=16, shuffle=True)
    test_dl = DataLoaders.from_dsets(_tokens(40, 2), bs=16, shuffle=False).train
    test_dl.shuffle, test_dl.drop_last = False, False
    curve = run.TestCurve(test_dl, tmp_path/'curve.jsonl')
    fit = fit_probes(dls, ['gap', 'ep:num_queries=2'], 3, 16, epochs=3, layer_order=[0], test_dl=test_dl, cbs=[curve],
                     progress=False, opt='adamw', blrs='0.01,0.1', halving=0.)
    rows = [json.loads(l) for l in (tmp_path/'curve.jsonl').read_text().splitlines()]
    assert len(rows) == 3 * len(fit.heads)                           # every head after every epoch
    for h, r in fit.heads.iterrows():                                # the best epoch's row is the final evaluation
        mine = [x for x in rows if x['head'] == h and x['epoch'] == r.best_epoch]
        assert len(mine) == 1 and mine[0]['correct'] == r.test_correct and mine[0]['test_top1'] == r.test_top1

def test_test_curve_skips_the_epochs_a_resume_skips(tmp_path):
    run = _load('protocol_run')
    dls = DataLoaders.from_dsets(_tokens(64, 0), _tokens(32, 1), bs=16, shuffle=True)
    test_dl = DataLoaders.from_dsets(_tokens(24, 2), bs=16, shuffle=False).train
    test_dl.shuffle, test_dl.drop_last = False, False
    learn = probe_learner(dls, ['gap'], 3, 16, layer_order=[0])
    learn.fit(3, cbs=[run.TestCurve(test_dl, tmp_path/'curve.jsonl')], start_epoch=2)   # as a resume after epoch 2
    rows = [json.loads(l) for l in (tmp_path/'curve.jsonl').read_text().splitlines()]
    assert [r['epoch'] for r in rows] == [2]          # epochs 0 and 1 were not run: no rows that would replace theirs

def test_the_slim_copy_gives_the_same_selection(tmp_path):
    rng, n = np.random.default_rng(2), 200
    c = {(e, h): _bits(rng, n, .5 + .1 * e) for e in range(4) for h in ('ep_blr=0.1', 'ep_blr=1.0')}
    f = _run(tmp_path/'r', {'ep': c[1, 'ep_blr=1.0']}, heads={'ep': 'ep_blr=1.0'}, epochs={'ep': 1})
    _curve(f, [(e, h, b) for (e, h), b in c.items()])
    full = cmp_.selection_table(f, n_boot=200)
    d = cmp_.slim(f, tmp_path/'copy')
    assert not (d/'test_curve.jsonl').exists() and len((d/'test_curve_bits.jsonl').read_text().splitlines()) <= 3
    assert cmp_.selection_table(d, n_boot=200).equals(full)
    (d/'test_curve_bits.jsonl').write_text('')                       # the bits the table reads are gone: it says so
    with pytest.raises(ValueError, match="not in test_curve.jsonl"): cmp_.selection_table(d, n_boot=10)
