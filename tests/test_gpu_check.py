"tests/gpu_check.sh (the GPU check of issue 15) on the CPU: its dry run passes, writes nothing, and fails on a flag a program lacks."
import os, subprocess, sys, json
from pathlib import Path

repo = Path(__file__).parent.parent
def sh(*args, env=None):
    env = dict(os.environ, PYTHONPATH=str(repo), PYTHON=sys.executable, **(env or {}))
    return subprocess.run(['bash', str(repo/'tests'/'gpu_check.sh'), *args], capture_output=True, text=True, timeout=900, env=env, cwd=repo)

def snapshot(d): return sorted((str(p), p.stat().st_mtime_ns) for p in d.rglob('*')) if d.exists() else None

def test_dry_run_checks_every_step_and_writes_nothing():
    steps = [l.split('\t')[0] for l in sh('--list').stdout.splitlines()]
    assert {'device', 'pytest_cuda', 'bench_fp32', 'bench_zoo', 'ep_probe', 'ep_probe_fp16', 'ep_probe_bf16', 'ep_probe_stream', 'pretrain', 'ddp_nccl',
            'scale_vitb', 'ep_probe_ddp', 'ep_probe_times', 'head_compile', 'decode'} <= set(steps), steps
    gpu = repo/'nbs'/'data'/'gpu'; before = snapshot(gpu)
    r = sh('--dry_run')
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    for s in steps: assert f'ok   {s}: ' in r.stdout, (s, r.stdout[-4000:])     # each step's programs and flags were checked
    assert 'ok   nbs/04a_zoo.ipynb' in r.stdout and 'cuda tests collected with --cuda, none without' in r.stdout
    assert 'ok   report writer' in r.stdout and r.stdout.rstrip().endswith('all checks passed')
    assert snapshot(gpu) == before                                        # the dry run never writes the results folder

def test_dry_run_fails_naming_a_bad_flag():
    bad = 'ep_bench --device cuda --no_such_flag 1'
    assert f'bench_fp32\t{bad}' in sh('--list', env=dict(GPU_CHECK_CMD_bench_fp32=bad)).stdout   # the override replaces the command
    r = sh('--dry_run', '--only', 'bench_fp32,ep_probe', env=dict(GPU_CHECK_CMD_bench_fp32=bad, GPU_CHECK_CMD_ep_probe='no_such_program --x'))
    assert r.returncode == 1, r.stdout[-3000:]
    assert 'FAIL bench_fp32: --no_such_flag is not a flag of `ep_bench --help`' in r.stdout, r.stdout[-3000:]
    assert 'FAIL ep_probe: no_such_program is not on PATH' in r.stdout and 'FAILED' in r.stdout.splitlines()[-1]

def test_ddp_script_runs_under_torchrun_on_cpu(tmp_path):
    "The harness of the ddp_nccl step, with gloo on the CPU: fit_probes' distributed callback runs and ddp.json says so"
    env = dict(os.environ, PYTHONPATH=str(repo), OMP_NUM_THREADS='1')
    r = subprocess.run([sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node=1', '--master_port=29571', str(repo/'tests'/'gpu_ddp.py'),
                        str(tmp_path/'ddp'), '--cpu'], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads((tmp_path/'ddp'/'ddp.json').read_text())
    assert d['ok'] and d['backend'] == 'gloo' and d['dl'] == '_DistributedDL' and d['world_size'] == 1 and d['explicit_trainer']
    assert set(d['top1']) == {'gap', 'ep_num_queries=4'} and (tmp_path/'ddp'/'results.csv').exists()
    r = subprocess.run([sys.executable, str(repo/'tests'/'gpu_ddp.py'), str(tmp_path/'x')], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode != 0 and 'start it with torchrun' in r.stderr

def test_runner_records_every_step_and_fails_loudly(tmp_path):
    "The run loop (commands replaced by shell one-liners): logs, steps.json and the summary written, exit 1 after a failed step"
    out = tmp_path/'gpu'
    r = sh('--out', str(out), '--only', 'bench_fp32,ep_probe,ddp_nccl',
           env=dict(GPU_CHECK_CMD_bench_fp32='echo benchmarked', GPU_CHECK_CMD_ep_probe='echo oops >&2; exit 3', GPU_CHECK_CMD_ddp_nccl='true'))
    assert r.returncode == 1, r.stdout[-3000:]
    steps = json.loads((out/'steps.json').read_text())
    assert [(s['name'], s['rc']) for s in steps] == [('bench_fp32', 0), ('ep_probe', 3), ('ddp_nccl', 0)], steps
    assert 'benchmarked' in (out/'logs'/'bench_fp32.log').read_text() and 'oops' in (out/'logs'/'ep_probe.log').read_text()
    assert json.loads((out/'summary.json').read_text())['failed'] == ['ep_probe'] and '2 of 3 steps passed' in r.stdout
    r = sh('--out', str(out), '--only', 'ep_probe', env=dict(GPU_CHECK_CMD_ep_probe='true'))   # a rerun replaces that step's record
    assert r.returncode == 0 and [(s['name'], s['rc']) for s in json.loads((out/'steps.json').read_text())] == [('bench_fp32', 0), ('ddp_nccl', 0), ('ep_probe', 0)]

def test_torchrun_step_checks_the_program_it_starts():
    "torchrun --no-python PROG: the dry run reads PROG's --help (not python PROG's), and finds a flag PROG lacks"
    bad = 'torchrun --nproc_per_node=1 --no-python ep_probe --device cuda --no_such_flag 1'
    r = sh('--dry_run', '--only', 'ep_probe_ddp', env=dict(GPU_CHECK_CMD_ep_probe_ddp=bad))
    assert r.returncode == 1 and 'FAIL ep_probe_ddp: --no_such_flag is not a flag of `ep_probe --help`' in r.stdout, r.stdout[-3000:]
    ok = sh('--list').stdout
    assert '--no-python ep_probe --device cuda' in ok and 'ep_bench_train --only scale --model vit_base_patch16_224' in ok

def test_times_harness_takes_the_default_job_apart_on_cpu(tmp_path):
    "The harness of the ep_probe_times step, on the CPU and a tiny job: every stage timed, the parts add up to the run"
    env = dict(os.environ, PYTHONPATH=str(repo), OMP_NUM_THREADS='1', MPLBACKEND='Agg')
    r = subprocess.run([sys.executable, str(repo/'tests'/'gpu_times.py'), str(tmp_path/'t'), '--device', 'cpu', '--train_size', '200',
                        '--test_size', '100', '--epochs', '1', '--probes', 'gap,ep', '--cache_dir', str(tmp_path/'c'), '--imports'],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads((tmp_path/'t'/'times.json').read_text()); t = d['times']
    stages = ('encoder_s', 'data_s', 'heads_s', 'extraction_s', 'verification_s', 'training_s', 'test_eval_s',
              'figure_meta_s', 'publish_s', 'bootstrap_s', 'rest_s')
    assert set(t) == {'interpreter_s', 'startup_s', 'import_s', 'cuda_init_s', 'run_s', 'total_s', *stages}, t
    assert all(t[k] > 0 for k in stages if k != 'rest_s') and t['rest_s'] >= 0   # gap vs ep: a bootstrap
    assert abs(sum(t[k] for k in stages) - t['run_s']) < 0.01 and t['total_s'] > t['run_s'] + t['import_s']
    assert 'test top-1' in d['report'] and (tmp_path/'t'/'run'/'results.csv').exists()
    assert {'torch', 'ep_probing'} <= set(d['imports']) and d['cpu'] and 'imports (python -X importtime' in r.stdout

def test_step_harness_times_the_default_grid_on_cpu(tmp_path):
    "The harness of the head_compile step, on the CPU and tiny: eager and fused AdamW, the same losses; graphs refused"
    env = dict(os.environ, PYTHONPATH=str(repo), OMP_NUM_THREADS='1')
    cmd = [sys.executable, str(repo/'tests'/'gpu_step.py'), str(tmp_path/'s'), '--device', 'cpu', '--steps', '2',
           '--warmup', '1', '--bs', '8', '--tokens', '4', '--dim', '32']
    r = subprocess.run(cmd + ['--modes', 'eager,fused'], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads((tmp_path/'s'/'step.json').read_text())['rows']
    assert [(x['mode'], x['heads']) for x in rows] == [('eager', 20), ('fused', 20)] and all(x['ms_per_step'] > 0 for x in rows)
    assert rows[1]['loss_rel_diff'] < 1e-3, rows               # fused AdamW: the same arithmetic, up to rounding
    r = subprocess.run(cmd + ['--modes', 'graphs'], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode != 0 and 'needs --device cuda' in r.stderr

def test_decode_harness_compares_pil_and_decode_jpeg_on_cpu(tmp_path):
    "The harness of the decode step, on the CPU and tiny: PIL and bytes + decode_jpeg rates, extraction both ways"
    env = dict(os.environ, PYTHONPATH=str(repo), OMP_NUM_THREADS='1')
    r = subprocess.run([sys.executable, str(repo/'tests'/'gpu_decode.py'), str(tmp_path/'d'), '--device', 'cpu', '--n', '8',
                        '--bs', '4', '--workers', '1', '--model', 'vit_tiny_patch16_224', '--work', str(tmp_path/'w')],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    d = json.loads((tmp_path/'d'/'decode.json').read_text())
    assert set(d['decode_images_per_s']) == {'pil', 'bytes_cpu'} and set(d['extraction_images_per_s']) == {'pil', 'bytes_cpu'}
    assert all(v > 0 for v in d['decode_images_per_s'].values()) and 0 < d['tokens_rel_diff'] < 0.05, d

def test_precision_matrix_steps():
    "Issue 49: the default job also runs with --precision fp16 and bf16; the summary records the choice and seconds"
    cmds = dict(l.split('\t', 1) for l in sh('--list').stdout.splitlines())
    for p in ('fp16', 'bf16'):
        assert f'ep_probe --device cuda --precision {p} --out' in cmds[f'ep_probe_{p}'], cmds[f'ep_probe_{p}']
    r = subprocess.run([sys.executable, str(repo/'tests'/'gpu_check.py'), 'selftest', '--steps', 'ep_probe,ep_probe_fp16'],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(repo)))
    assert r.returncode == 0 and 'ok   report writer' in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
