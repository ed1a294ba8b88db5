"""`torchrun --nproc_per_node=2 ep_probe` on the CPU (gloo): rank 0 alone writes one set of results, they are one
process's (global batch 256 either way), and a rank killed (SIGKILL) during extraction or training leaves a run that
the same command with `--resume` completes to the same results."""
import json, os, re, shutil, subprocess, sys
from pathlib import Path
import pandas as pd, pytest

here = Path(__file__).parent
ep_probe = Path(sys.executable).parent/'ep_probe'     # the script itself: torchrun runs it with python (not a shim)
ARGS = ['--probes', 'gap,ep', '--epochs', '2', '--train_size', '600', '--test_size', '200', '--precision', 'none']
WROTE = {'attention.png', 'grid.csv', 'heads', 'log.csv', 'meta.json', 'results.csv', 'results.json'}

def run(args, env=None):
    env = dict(os.environ, PYTHONPATH=str(here.parent), OMP_NUM_THREADS='1', **(env or {}))
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=600, env=env)

def torchrun(script, out, cache, *extra, env=None):
    "2 ranks of batch 128 (a global batch of 256, one process's default)"
    tr = shutil.which('torchrun')
    assert tr, "torchrun is not on PATH (it comes with torch)"
    return run([tr, '--standalone', '--nproc_per_node=2', script, *ARGS, '--bs', '128', '--out', out,
                '--cache_dir', cache, *extra], env)

def ok(r): assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
def chosen(out): return pd.read_json(out/'results.json').set_index('probe')[['head', 'top1', 'test_top1', 'best_epoch']]
def curves(out): return pd.read_csv(out/'grid.csv').set_index(['head', 'epoch']).val_top1

@pytest.fixture(scope='module')
def ddp(tmp_path_factory):
    "One uninterrupted run of the real `ep_probe` on 2 ranks: its folder and its output"
    d = tmp_path_factory.mktemp('ddp'); r = torchrun(ep_probe, d/'out', d/'cache'); ok(r)
    return d, r

def test_two_ranks_write_one_set_of_results_that_one_process_gets(ddp, tmp_path):
    d, r = ddp
    assert {p.name for p in (d/'out').iterdir()} == WROTE              # no .partial, .lock or stray file of rank 1
    assert r.stdout.count('test top-1') == 1 and r.stdout.count('\nwrote ') == 1     # rank 0 alone reports
    assert 'each grid halved after epoch 1' in r.stdout                   # halving runs under DDP
    one = run([ep_probe, *ARGS, '--bs', '256', '--out', tmp_path/'one', '--cache_dir', d/'cache']); ok(one)
    a, b = chosen(tmp_path/'one'), chosen(d/'out')
    assert list(a['head']) == list(b['head'])                            # the same grid points chosen
    # fp32, the same global batches (`engine.rank_batches`), BatchNorm statistics over both ranks
    # (`engine.GroupBatchNorm`): only the order of float sums differs. Measured: every head's validation curve and
    # the test top-1 equal; allowed: one validation image of 60, one test image of 200.
    assert (curves(tmp_path/'one') - curves(d/'out')).abs().max() <= 1 / 60 + 1e-9
    assert (a.test_top1 - b.test_top1).abs().max() <= 1 / 200 + 1e-9

def test_rank_killed_during_extraction_resumes_to_the_same_results(ddp, tmp_path):
    d, _ = ddp
    env = dict(EP_TEST_SHARD='128')                                      # 5 train shards: rank 1 extracts 2 of them
    killed = torchrun(here/'ddp_probe.py', tmp_path/'out', tmp_path/'cache', env=dict(env, EP_TEST_DIE='extract:1:1'))
    assert killed.returncode != 0
    shards = sorted((tmp_path/'cache').glob('*/shard_*'))
    assert shards and not list((tmp_path/'cache').glob('*/manifest.json'))           # nothing reads as complete
    assert all(sorted(p.name for p in s.iterdir()) == ['files.json', 'labels.npy', 'patch.npy', 'prefix.npy']
               for s in shards)                                          # only whole shards
    assert not (tmp_path/'out'/'results.csv').exists()
    resumed = torchrun(here/'ddp_probe.py', tmp_path/'out', tmp_path/'cache', '--resume', env=env); ok(resumed)
    assert 'shards already done' in resumed.stdout
    pd.testing.assert_frame_equal(chosen(tmp_path/'out'), chosen(d/'out'))
    assert {p.name for p in (tmp_path/'out').iterdir()} == WROTE

def test_rank_killed_during_training_resumes_to_the_same_results(ddp, tmp_path):
    d, _ = ddp
    killed = torchrun(here/'ddp_probe.py', tmp_path/'out', d/'cache', env=dict(EP_TEST_DIE='train:1:1'))
    assert killed.returncode != 0
    assert (tmp_path/'out'/'.partial'/'checkpoint.pth').exists() and not (tmp_path/'out'/'results.csv').exists()
    resumed = torchrun(here/'ddp_probe.py', tmp_path/'out', d/'cache', '--resume'); ok(resumed)
    assert 'epoch 2/2' in resumed.stdout and 'epoch 1/2' not in resumed.stdout      # epoch 1 came from the checkpoint
    pd.testing.assert_frame_equal(chosen(tmp_path/'out'), chosen(d/'out'))
    pd.testing.assert_series_equal(curves(tmp_path/'out'), curves(d/'out'))
    assert len((tmp_path/'out'/'log.csv').read_text().splitlines()) == 3           # a header and 2 epochs

def test_effective_batch_counts_every_rank(ddp, tmp_path):
    "2 ranks of 64 accumulating to 256 take one process's steps of 128 accumulated to 256: the same curves"
    d, _ = ddp
    acc = ['--accum_bs', '256', '--halving', '0']
    two = torchrun(ep_probe, tmp_path/'two', d/'cache', '--bs', '64', *acc); ok(two)    # the last --bs wins
    one = run([ep_probe, *ARGS, '--bs', '128', *acc, '--out', tmp_path/'one', '--cache_dir', d/'cache']); ok(one)
    assert 'effective batch 256' in two.stdout
    assert list(chosen(tmp_path/'one')['head']) == list(chosen(tmp_path/'two')['head'])
    assert (curves(tmp_path/'one') - curves(tmp_path/'two')).abs().max() <= 1 / 60 + 1e-9   # as above

def test_paper_recipe_streams_under_ddp(ddp, tmp_path):
    "`--recipe paper` (streamed, LARS, accumulation) on 2 ranks: one epoch, one set of results"
    d, _ = ddp
    r = torchrun(ep_probe, tmp_path/'out', d/'cache', '--recipe', 'paper', '--epochs', '1', '--accum_bs', '512',
                 '--blrs', '0.1,1', '--knn'); ok(r)
    assert r.stderr.count('warning: --knn needs cached tokens') == 1          # 48.25: once, by rank 0
    assert 'streamed' in r.stdout and 'effective batch 512' in r.stdout and r.stdout.count('\nwrote ') == 1
    assert {p.name for p in (tmp_path/'out').iterdir()} == WROTE

def ranks_torchrun(script, out, cache, logs, *extra, env=None):
    "`torchrun` as above, each rank's output in its own files under `logs` (`--redirects 3`)"
    tr = shutil.which('torchrun')
    return run([tr, '--standalone', '--nproc_per_node=2', '--log_dir', logs, '--redirects', '3', script, *ARGS,
                '--bs', '128', '--out', out, '--cache_dir', cache, *extra], env)

def rank_lines(logs)->list:
    "Each rank's stdout and stderr, in rank order"
    def said(d): return ''.join(l for l in ((d/'stdout.log').read_text() + (d/'stderr.log').read_text()).splitlines(True)
                                if not l.startswith('waiting up to '))    # rank 0's line while the ranks join
    return [said(d) for d in sorted(Path(logs).glob('*/attempt_0/*'), key=lambda d: int(d.name))]

def test_rank0_decides_and_every_rank_says_the_same_line(ddp, tmp_path):
    "48.13: `--out` a file, `--out` held by another job, `--resume` on a finished run: one line on each rank, exit 2"
    from ep_probing.core import out_lock
    d, _ = ddp
    (tmp_path/'file').write_text('x'); before = {p.name: p.stat().st_mtime_ns for p in (d/'out').rglob('*')}
    cases = [(tmp_path/'file', [], 'cannot write to the output folder'),
             (d/'out', ['--resume'], 'is finished, nothing to resume'),
             (tmp_path/'held', [], 'is in use by another run')]
    with out_lock(tmp_path/'held'):                                        # another job holds it
        for i, (out, extra, says) in enumerate(cases):
            r = ranks_torchrun(ep_probe, out, d/'cache', tmp_path/f'logs{i}', *extra)
            lines = rank_lines(tmp_path/f'logs{i}')
            # the first rank out exits 2; torchrun may stop the other (SIGTERM) once it has said the same line
            codes = re.findall(r'exitcode  : (-?\d+)', r.stderr)
            assert r.returncode != 0 and len(lines) == 2 and '2' in codes and set(codes) <= {'2', '-15'}, r.stderr
            for l in lines:
                assert 'Traceback' not in l and l.strip().splitlines() == lines[0].strip().splitlines(), lines
                assert len(l.strip().splitlines()) == 1 and l.startswith('ep_probe: error: ') and says in l, l
    assert {p.name: p.stat().st_mtime_ns for p in (d/'out').rglob('*')} == before        # the finished run: untouched

def test_the_run_is_reported_whole(ddp, tmp_path):
    "48.4/48.25: the header and meta.json say 2 processes; the extraction lines count every rank's images"
    d, r = ddp
    assert '2 processes x batch 128 (global batch 256)' in r.stdout
    meta = json.loads((d/'out'/'meta.json').read_text())
    assert (meta['world_size'], meta['global_batch'], meta['bs']) == (2, 256, 128)
    s = torchrun(here/'ddp_probe.py', tmp_path/'out', tmp_path/'cache', '--probes', 'gap', '--epochs', '1',
                 env=dict(EP_TEST_SHARD='128')); ok(s)                # 5 + 2 shards, the ranks take turns
    assert 'extracted 600 images' in s.stdout and 'extracted 200 images' in s.stdout, s.stdout
