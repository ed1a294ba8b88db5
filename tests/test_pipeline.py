"run_probing end to end: streaming with augmentation, and clear errors for bad options."
import pytest, timm, torch
from ep_probing.pipeline import run_probing

def tiny_vit():
    torch.manual_seed(0)
    return timm.models.VisionTransformer(img_size=28, patch_size=7, in_chans=1, embed_dim=32, depth=2, num_heads=2, num_classes=0)

def test_streaming_run_writes_results(tmp_path):
    learn = run_probing(tiny_vit(), probes='gap,ep:num_queries=4', epochs=2, bs=64, train_size=600, test_size=200,
                        stream=True, out=tmp_path/'o', progress=False)
    r = learn.results
    assert list(r.index) == ['gap', 'ep_num_queries=4'] and r.test_top1.between(0, 1).all()
    assert sorted(p.name for p in (tmp_path/'o').iterdir()) == ['attention.png', 'grid.csv', 'heads', 'log.csv', 'meta.json', 'results.csv', 'results.json']   # the default learning-rate grid

@pytest.mark.parametrize('kw, msg', [(dict(layers='7'), 'valid indices are 0..1'), (dict(probes='nope'), 'unknown probe'),
                                     (dict(data='/nonexistent'), 'is not a dataset name'), (dict(probes=''), '--probes is empty')])
def test_bad_options(tmp_path, kw, msg):
    with pytest.raises(ValueError, match=msg):
        run_probing(tiny_vit(), epochs=1, train_size=200, test_size=100, out=tmp_path/'o', cache_dir=tmp_path/'c', progress=False, **kw)

def test_each_head_built_once(tmp_path, monkeypatch):
    "A default-style run builds every head once: the dry run checks the heads that then train (`specs.build_heads`)"
    import ep_probing.specs as specs
    made, create = [], specs.create_probe
    monkeypatch.setattr(specs, 'create_probe', lambda *a, **k: made.append(a[0]) or create(*a, **k))
    run = run_probing(tiny_vit(), probes='lp,gap,ep:num_queries=4', epochs=1, bs=64, train_size=200, test_size=100,
                      out=None, cache_dir=tmp_path/'c', progress=False)
    assert len(made) == len(run.heads) == len(run.specs) == 15             # 3 probes x the default 5-point blr grid
    assert all(run.model.probes[k] is not None for k in run.specs)

def hidden_debian(cmd:str, tmp_path):
    "Run `cmd` in `tmp_path` with the Debian Fashion-MNIST folder hidden by an empty bind mount (root, private mount namespace), and HOME there"
    import os, shutil, subprocess
    assert os.geteuid() == 0 and shutil.which('unshare'), "these tests run as root with unshare (CI does)"
    empty = tmp_path/'empty'; empty.mkdir()
    env = dict(os.environ, HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path/'.cache'))
    script = f"mount --bind {empty} /usr/share/datasets/fashion-mnist && test -z \"$(ls /usr/share/datasets/fashion-mnist)\" && {cmd}"
    return subprocess.run(['unshare', '-m', 'sh', '-c', script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1200)

def test_default_ep_probe_needs_no_debian_data(tmp_path):
    "`ep_probe` with no arguments runs on the embedded sample with the Debian folder hidden and nothing cached"
    r = hidden_debian('ep_probe', tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert 'mae_fmnist (shipped weights) on fashion_mnist_sample' in r.stdout and '\r' not in r.stdout    # a log, not a terminal: no carriage returns
    import pandas as pd
    res = pd.read_csv(tmp_path/'ep_probe_out'/'results.csv', index_col=0)
    assert list(res.index) == ['lp', 'gap', 'ep', 'mhca'] and (res.test_top1 > 0.7).all(), res
    assert res.loc['ep', 'test_top1'] > res.loc['lp', 'test_top1']
    assert len(r.stdout) < 5000, len(r.stdout)                                      # about one line per stage and epoch

def test_full_fashion_mnist_offline_error(tmp_path):
    "`--data fashion_mnist` with no files anywhere and no internet: one line naming the fixes, exit 2, no traceback"
    r = hidden_debian('ep_probe --data fashion_mnist', tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    err = r.stderr.strip().splitlines()
    assert 'Traceback' not in r.stderr and err[-1].startswith('ep_probe: error: ') and len(err) == 1, r.stderr[-2000:]
    assert 'apt-get install -y dataset-fashion-mnist' in err[-1] and '--data_path' in err[-1]

def test_grid_from_the_command_line(tmp_path):
    "`ep_probe` with a grid in a probe spec and --blrs for the others: one row per probe with the chosen blr, grid.csv, chosen heads"
    import subprocess, pandas as pd
    r = subprocess.run(['ep_probe', '--probes', 'gap,ep:num_queries=8,blr=1e-3|1e-2', '--blrs', '0.01,0.1', '--epochs', '2', '--train_size', '1000',
                        '--test_size', '500', '--halving', '0', '--out', str(tmp_path/'o'), '--cache_dir', str(tmp_path/'c')], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    res = pd.read_csv(tmp_path/'o'/'results.csv', index_col=0)
    assert list(res.index) == ['gap', 'ep_num_queries=8'] and res.loc['gap', 'blr'] in (0.01, 0.1) and res.loc['ep_num_queries=8', 'blr'] in (1e-3, 1e-2)
    grid = pd.read_csv(tmp_path/'o'/'grid.csv')
    assert sorted(grid['head'].unique()) == ['ep_num_queries=8_blr=1e-2', 'ep_num_queries=8_blr=1e-3', 'gap_blr=0.01', 'gap_blr=0.1'] and len(grid) == 8
    assert sorted(f.name for f in (tmp_path/'o'/'heads').iterdir()) == ['ep_num_queries=8.json', 'ep_num_queries=8.safetensors', 'gap.json', 'gap.safetensors']
    assert 'blr' in r.stdout and 'at the edge' in r.stderr                     # a 2-point grid: the choice is always at an edge
