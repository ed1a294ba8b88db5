"Training end to end in subprocesses, with a learning-rate grid for EP: a run killed mid-way resumes to the same result; torchrun with 2 CPU processes matches one process."
import json, os, shutil, subprocess, sys
from pathlib import Path
import pandas as pd, torch

here = Path(__file__).parent
def run(args, **kw):
    env = dict(os.environ, PYTHONPATH=str(here.parent), OMP_NUM_THREADS='1')
    return subprocess.run(args, capture_output=True, text=True, timeout=600, env=env, **kw)

def test_killed_run_resumes_to_the_same_result(tmp_path):
    full = run([sys.executable, here/'ddp_fit.py', tmp_path/'full', '--epochs', '3'])
    assert full.returncode == 0, full.stderr[-3000:]
    killed = run([sys.executable, here/'ddp_fit.py', tmp_path/'res', '--epochs', '3', '--die-after-epoch', '1'])
    assert killed.returncode == 9                                   # died hard after epoch 1
    assert not (tmp_path/'res'/'results.csv').exists()              # nothing reads as complete
    assert (tmp_path/'res'/'.partial'/'checkpoint.pth').exists()
    resumed = run([sys.executable, here/'ddp_fit.py', tmp_path/'res', '--epochs', '3', '--resume'])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    a, b = torch.load(tmp_path/'full.rank0.pt'), torch.load(tmp_path/'res.rank0.pt')
    for k in a: torch.testing.assert_close(a[k], b[k], atol=1e-6, rtol=1e-5)   # same final weights
    ra, rb = pd.read_csv(tmp_path/'full'/'results.csv'), pd.read_csv(tmp_path/'res'/'results.csv')
    assert (ra.top1 == rb.top1).all() and (ra.best_epoch == rb.best_epoch).all()
    log = (tmp_path/'res'/'log.csv').read_text().splitlines()
    assert len(log) == 4 and log[0].startswith('epoch') and [l.split(',')[0] for l in log[1:]] == ['0', '1', '2']   # one header, 3 epochs
    assert not (tmp_path/'res'/'.partial').exists()

def test_torchrun_two_cpu_processes_match_one(tmp_path):
    torchrun = shutil.which('torchrun')
    assert torchrun, "torchrun is not on PATH (it comes with torch)"
    one = run([sys.executable, here/'ddp_fit.py', tmp_path/'one'])
    assert one.returncode == 0, one.stderr[-3000:]
    two = run([torchrun, '--nproc_per_node=2', '--master_port=29533', here/'ddp_fit.py', tmp_path/'two'])
    assert two.returncode == 0, two.stderr[-3000:]
    r1 = json.loads((tmp_path/'one.rank0.json').read_text())
    r2 = [json.loads((tmp_path/f'two.rank{i}.json').read_text()) for i in (0, 1)]
    assert r2[0] == r2[1] or all(a['top1'] == b['top1'] for a, b in zip(*r2))  # metrics are gathered: both ranks agree
    for a, b in zip(r1, r2[0]): assert abs(a['top1'] - b['top1']) < 0.08, (a, b)
    w0, w1 = torch.load(tmp_path/'two.rank0.pt'), torch.load(tmp_path/'two.rank1.pt')
    for k in w0:
        if 'running' not in k and 'num_batches' not in k: torch.testing.assert_close(w0[k], w1[k])   # DDP kept the replicas in sync
    files = sorted(p.name for p in (tmp_path/'two').rglob('*'))
    assert files == ['ep_num_queries=4.json', 'ep_num_queries=4.safetensors', 'gap.json', 'gap.safetensors', 'grid.csv', 'heads', 'log.csv', 'results.csv', 'results.json']   # the chosen grid point of ep only
    assert len((tmp_path/'two'/'log.csv').read_text().splitlines()) == 4   # written once (rank 0), not twice
