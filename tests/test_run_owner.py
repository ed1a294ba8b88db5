"""One owner for a run: `RunConfig` decides the device once (`--device cpu` stays on the CPU on a host that reports
CUDA), its fields are the command's flags and the resume record, and a new option (`--wd`) reaches the optimiser."""
from functools import partial
from dataclasses import fields
from pathlib import Path
import json, subprocess, sys
import pytest
from ep_probing.cli import ep_probe
from ep_probing.config import RunConfig, resolve_precision
from ep_probing.pipeline import run_probing
sys.path.insert(0, str(Path(__file__).parent))
import console   # noqa: E402
from standin import host   # noqa: E402

TINY = ['--train_size', '300', '--test_size', '100', '--epochs', '1', '--probes', 'gap,ep', '--blrs', '0.1']
run_cli = partial(console.run_cli, ep_probe)


def test_device_cpu_on_a_driverless_host(tmp_path, monkeypatch, capsys):
    "CUDA says it is here, and every other CUDA call fails (a node whose driver is gone): `--device cpu` asks none"
    with host(driverless=True) as calls:
        with pytest.raises(ValueError, match=r'the CUDA device cuda is visible but cannot be used .*use device=.cpu.'):
            RunConfig().extract_precision                                 # the GPU, tried: one line, not CUDATouched
        code, _, err = run_cli(monkeypatch, capsys, [*TINY, '--out', tmp_path/'o0', '--cache_dir', tmp_path/'c'])
        assert code == 2 and err.count('\n') == 1 and 'cannot be used' in err and '--device cpu' in err, err
        assert not (tmp_path/'o0'/'results.csv').exists() and not (tmp_path/'c').exists()   # nothing done first
        calls.clear(); cpu = {'none': 'fp32'}.get(p := resolve_precision('auto', 'cpu'), p)   # the stand-in CPU's
        code, out, err = run_cli(monkeypatch, capsys, [*TINY, '--device', 'cpu', '--out', tmp_path/'o',
                                                       '--cache_dir', tmp_path/'c'])
    assert code == 0 and calls == [], (err, calls)                           # no CUDA call, not even fastai's
    assert f'({cpu} extraction, {cpu} heads; CPU' in out, out                # the CPU's precision, both, and why
    assert (tmp_path/'o'/'results.csv').exists()


def test_run_record_is_every_result_field(tmp_path):
    run = run_probing('mae_fmnist', 'fashion_mnist_sample', 'gap', epochs=1, train_size=300, test_size=100, blrs='0.1',
                      out=str(tmp_path/'o'), cache_dir=str(tmp_path/'c'), progress=False, wd=0.05)
    meta = json.loads((tmp_path/'o'/'meta.json').read_text())
    result = {f.name for f in fields(RunConfig)} - set(RunConfig.where)
    assert result <= set(meta) and not set(RunConfig.where) & set(meta)
    assert (meta['wd'], meta['norm'], meta['precision']) == (0.05, None, 'auto')
    assert run.learn.opt.hypers[0]['wd'] == 0.05                             # the new option reached the optimiser


def test_wd_default_and_resume_refusal(tmp_path, monkeypatch, capsys):
    run = run_probing('mae_fmnist', 'fashion_mnist_sample', 'gap', epochs=1, train_size=300, test_size=100, blrs='0.1',
                      out=None, cache_dir=str(tmp_path/'c'), progress=False)
    assert run.learn.opt.hypers[0]['wd'] == 1e-4                             # adamw's default, as before the flag
    work = tmp_path/'o'/'.partial'; work.mkdir(parents=True)
    (work/'checkpoint.pth').write_bytes(b''); (work/'run.json').write_text(json.dumps(RunConfig(wd=0.1).record()))
    code, out, err = run_cli(monkeypatch, capsys, ['--resume', '--out', tmp_path/'o', '--cache_dir', tmp_path/'c'])
    assert code == 2 and 'has --wd 0.1 but this command gives --wd None' in err, err


@pytest.mark.parametrize('args, msg', [(['--wd', '-1'], '--wd -1.0: weight decay is a finite number'),
                                       (['--device', 'tpu'], "--device tpu: use cpu, cuda, cuda:N"),
                                       (['--opt', 'sgd'], '--opt sgd: use adamw, lars'),
                                       (['--decode', 'nvjpeg'], '--decode nvjpeg: use auto, cpu, gpu'),
                                       (['--decode', 'gpu', '--stream'], '--decode gpu decodes for extraction; --stream')])
def test_config_checks_before_torch_loads(args, msg):
    code = ("import sys; sys.argv = ['ep_probe', *sys.argv[1:]]; from ep_probing.cli import ep_probe_main\n"
            "try: ep_probe_main()\nexcept SystemExit as e: print(e.code, 'torch' in sys.modules)")
    r = subprocess.run([sys.executable, '-c', code, *args], capture_output=True, text=True, timeout=300)
    assert r.stdout.split() == ['2', 'False'], (r.stdout, r.stderr)
    assert r.stderr.startswith('ep_probe: error: ') and msg in r.stderr, r.stderr


def test_recipe_yields_to_a_flag_written_at_its_default(monkeypatch, capsys):
    "`ep_probe --recipe paper --epochs 10`: 10 epochs, although 10 is also the plain default (the recipe gives 90)"
    import ep_probing.pipeline as pipeline
    seen = {}
    def stop(encoder, data, probes, cfg): seen['cfg'] = cfg; raise ValueError('stopped before any work')
    monkeypatch.setattr(pipeline, 'run_probing', stop)
    code, _, err = run_cli(monkeypatch, capsys, ['--recipe', 'paper', '--epochs', '10', '--opt=adamw'])
    assert code == 2 and 'stopped before any work' in err, err
    assert (seen['cfg'].epochs, seen['cfg'].opt, seen['cfg'].accum_bs) == (10, 'adamw', RunConfig.paper().accum_bs)
    run_cli(monkeypatch, capsys, ['--recipe', 'paper'])                          # nothing written: the recipe's values
    assert (seen['cfg'].epochs, seen['cfg'].opt) == (RunConfig.paper().epochs, 'lars')
