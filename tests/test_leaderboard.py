"`ep_leaderboard` on three real runs: two seeds of the embedded MAE encoder (with k-NN) and a randomly initialised timm ViT."
import json, subprocess
import pandas as pd, pytest
from ep_probing.pipeline import run_probing

TINY = dict(probes='lp,ep:num_queries=4', blrs='none', blr=0.1, epochs=1, train_size=500, test_size=200, progress=False)


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp('runs')
    for name, enc, kw in [('mae0', 'mae_fmnist', dict(seed=0, knn=True)), ('mae1', 'mae_fmnist', dict(seed=1, knn=True)),
                          ('vit', 'vit_tiny_patch16_224', dict(seed=0, pretrained=False, img_size=32))]:
        run_probing(enc, out=d/name, cache_dir=d/'cache', **TINY, **kw)
    return d


def test_ep_leaderboard_three_runs(runs):
    r = subprocess.run(['ep_leaderboard', runs/'mae0', runs/'mae1', runs/'vit', '--out', runs/'board'],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lb = pd.read_csv(runs/'board'/'leaderboard.csv', dtype=str, keep_default_na=False)
    assert list(lb.backbone) == ['mae_fmnist', 'vit_tiny_patch16_224'] and list(lb.weights) == ['shipped', 'random init']
    assert list(lb.seeds) == ['0,1', '0']
    res = [pd.read_json(runs/n/'results.json').set_index('probe') for n in ('mae0', 'mae1')]
    ep = [100 * x.loc['ep_num_queries=4', 'test_top1'] for x in res]
    mean, sd = pd.Series(ep).mean(), pd.Series(ep).std()
    assert lb.loc[0, 'ep_num_queries=4'] == f"{mean:.2f} ± {sd:.2f}"                  # mean ± std over the two seeds
    knn = [max(v['top1'] for v in json.loads((runs/n/'knn.json').read_text()).values()) for n in ('mae0', 'mae1')]
    assert lb.loc[0, 'k-NN'].startswith(f"{100 * sum(knn) / 2:.2f}") and lb.loc[1, 'k-NN'] == ''
    assert lb.loc[0, 'lp blr'] == '0.1,0.1' and lb.loc[0, 'lp params'] == f"{int(res[0].loc['lp', 'params']):,}"
    md = (runs/'board'/'leaderboard.md').read_text()
    assert md.startswith('| backbone | weights | data | seeds | k-NN | lp | ep_num_queries=4 |') and md.count('\n') == 4
    assert (runs/'board'/'leaderboard.png').stat().st_size > 10_000
    assert json.loads((runs/'board'/'leaderboard.json').read_text())['command'].startswith('ep_leaderboard')


def test_ep_leaderboard_not_a_run(tmp_path):
    r = subprocess.run(['ep_leaderboard', tmp_path, '--out', tmp_path/'lb'], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.startswith('ep_leaderboard: error: ') and 'no results.json' in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path/'lb').exists()


def test_ep_compare_runs_on_the_same_images(runs):
    "Two real runs on the same test subset (seed 0): each shared probe compared image by image; one run: each probe vs its best"
    r = subprocess.run(['ep_compare', runs/'mae0', runs/'vit'], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert [l.split(':')[0] for l in lines] == ['lp in mae0 vs lp in vit', 'ep_num_queries=4 in mae0 vs ep_num_queries=4 in vit'], lines
    res = {n: pd.read_json(runs/n/'results.json').set_index('probe') for n in ('mae0', 'vit')}
    diff = 100 * (res['mae0'].loc['lp', 'test_top1'] - res['vit'].loc['lp', 'test_top1'])
    assert lines[0].split(': ')[1].startswith(f"{diff:+.2f} points ["), (lines[0], diff)    # the difference of the two accuracies
    assert 'McNemar p = ' in lines[0]
    one = subprocess.run(['ep_compare', runs/'mae0'], capture_output=True, text=True, timeout=300)
    assert one.returncode == 0 and len(one.stdout.strip().splitlines()) == 1 and ' vs ' in one.stdout, one.stdout + one.stderr
    bad = subprocess.run(['ep_compare', runs/'mae0', runs/'mae1'], capture_output=True, text=True, timeout=300)   # seed 1: other test subset
    assert bad.returncode == 2 and 'not tested on the same images' in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
