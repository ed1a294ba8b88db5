"""Only `config` decides the device: `ep_bench`, `bench_stack` and `ep_pretrain` go through `config.resolve_device` and
`config.resolve_precision`, so `--device cpu` keeps a run on the CPU where CUDA is present and `--device cuda` without
CUDA is one line, exit 2. `mae` imports nothing from a floor above it. Run in this process, as each console script does."""
import ast, os, sys
from pathlib import Path
import torch
import ep_probing
from ep_probing import bench, bench_train, mae
from ep_probing.bench import ep_bench
from ep_probing.mae import ep_pretrain, _check_pretrain
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from console import run_cli   # noqa: E402

pkg = Path(ep_probing.__file__).parent
tiny = ['--probes', 'ep,mhca', '--batch_size', '2', '--num_tokens', '4', '--dim', '32', '--num_classes', '3',
        '--steps', '1', '--warmup', '0']


def one_line_error(cmd, code, err, contains):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and 'Traceback' not in err, err
    assert lines[0].startswith(f'{cmd}: error: ') and contains in lines[0], lines[0]


def test_no_module_of_these_asks_cuda():
    for m in (bench, bench_train, mae):
        assert 'cuda.is_available' not in Path(m.__file__).read_text(), m.__name__


def test_ep_bench_device_cpu_where_cuda_is_present(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    code, out, err = run_cli(ep_bench, monkeypatch, capsys, [*tiny, '--device', 'cpu', '--csv', tmp_path/'b.csv'])
    assert code == 0, err
    assert ' on cpu (' in out.splitlines()[0], out
    assert (tmp_path/'b.csv').read_text().startswith('probe,params')


def test_ep_bench_device_cuda_without_cuda(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    code, out, err = run_cli(ep_bench, monkeypatch, capsys, [*tiny, '--device', 'cuda', '--csv', tmp_path/'b.csv'])
    one_line_error('ep_bench', code, err, '--device cuda: no CUDA device is visible here; use --device cpu')
    assert out == '' and not (tmp_path/'b.csv').exists()           # nothing measured, nothing written


def test_bench_stack_device_cpu_where_cuda_is_present(monkeypatch):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    r = bench_train.bench_stack(N=4, P=1, C=16, specs=('gap',), bs=4, steps=1, device='cpu')
    assert r['device'] == 'cpu' and r['probes']['gap']['together_ms'] > 0


def test_ep_pretrain_fp16_without_cuda(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    for flag in ('--precision', '--amp'):
        code, out, err = run_cli(ep_pretrain, monkeypatch, capsys, ['--out', tmp_path/'m', flag, 'fp16'])
        one_line_error('ep_pretrain', code, err, 'fp16 needs CUDA; on the CPU use bf16 or none')
    assert list(tmp_path.iterdir()) == []                             # checked before any data is read or written


def test_pretrain_check_takes_fp16_where_cuda_is_present(monkeypatch):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    a = dict(epochs=1, bs=1, warmup=0, seed=0, patch_size=4, embed_dim=8, depth=1, num_heads=1, decoder_dim=8,
             decoder_depth=1, decoder_num_heads=1, limit=None, lr=1e-3, mask_ratio=.75, wd=.05, precision='fp16',
             amp=None)
    assert _check_pretrain(a) == 'fp16'


def _imports(tree):
    "The `ep_probing` modules each top-level function or class (None: the other statements) of a module imports"
    out = {}
    for s in tree.body:
        name = s.name if isinstance(s, (ast.FunctionDef, ast.ClassDef)) else None
        for n in ast.walk(s):
            if isinstance(n, ast.ImportFrom) and (n.level or (n.module or '').startswith('ep_probing')):
                out.setdefault(name, set()).add((n.module or '').removeprefix('ep_probing').strip('.'))
    return out


def test_mae_imports_only_lower_floors():
    below = {'core', 'dist', 'config', 'engine', 'encoders', 'data'}
    got = _imports(ast.parse((pkg/'mae.py').read_text()))
    assert 'mae_fmnist_eval' not in got                                # the old forwarding name is gone
    assert set().union(*got.values()) <= below, got


def test_mae_fmnist_eval_lives_in_experiments():
    from ep_probing import experiments
    assert experiments.mae_fmnist_eval.__module__ == 'ep_probing.experiments'
    assert 'run_probing' in Path(experiments.__file__).read_text()
