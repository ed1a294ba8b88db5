"""`ep_probe` with bad inputs, from an adversarial pass: each case fails with one line `ep_probe: error: ...` and exit 2
(never a traceback), before any extraction or training, and leaves what was already written alone."""
from functools import partial
import json, os, subprocess, sys
from pathlib import Path
import pytest, torch
from PIL import Image
from ep_probing.cli import ep_probe
from ep_probing.core import out_lock
sys.path.insert(0, str(Path(__file__).parent))
import console   # noqa: E402

TINY = ['--train_size', '500', '--test_size', '200', '--epochs', '1']


run_cli = partial(console.run_cli, ep_probe)   # `(monkeypatch, capsys, args)` -> `(code, out, err)`


def one_line_error(code, err, contains):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and 'Traceback' not in err, err
    assert lines[0].startswith('ep_probe: error: ') and contains in lines[0], lines[0]


def folder(root:Path, classes=('a', 'b'), n=3):
    "A tiny image folder dataset, train/ and test/, `n` PNGs per class"
    for split in ('train', 'test'):
        for c in classes:
            (root/split/c).mkdir(parents=True, exist_ok=True)
            for i in range(n): Image.new('RGB', (32, 32), (40 * i, 90, 30)).save(root/split/c/f'{i}.png')
    return root


BAD = [
    (['--probes', 'ep:blr=abc'], "got 'abc'"), (['--probes', 'ep:blr=nan'], 'finite positive'),
    (['--probes', 'ep:blr=inf'], 'finite positive'), (['--probes', 'ep:blr=-1'], 'finite positive'),
    (['--probes', 'ep:blr='], 'empty value'), (['--probes', 'ep:blr=1e-3|'], 'empty value'),
    (['--probes', 'ep:blr=' + '|'.join(['1e-3'] * 100)], 'at most 64'),
    (['--blr', 'nan'], '--blr nan: a learning rate must be a finite positive'), (['--lr', '-1'], '--lr'),
    (['--blrs', 'inf,1e-3'], "--blrs inf,1e-3: a learning rate must be a finite positive number like 1e-3, got 'inf'"), (['--train_size', '-5'], '--train_size -5'),
    (['--seed', '-1'], '--seed -1'), (['--workers', '-1', '--stream'], '--workers -1'),
    (['--train_size', '10', '--bs', '1'], 'give a larger --train_size'), (['--epochs', '0'], '--epochs 0'),
    (['--out', '/proc/nope'], 'choose a writable --out'), (['--probes', 'nosuch'], 'unknown probe'),
    (['--layers', '9'], 'valid indices'), (['--valid_pct', '1.5'], '--valid_pct'), (['--opt', 'sgd'], '--opt'),
    (['--norm', 'yes'], '--norm'), (['--device', 'tpu'], '--device'), (['--precision', 'fp8'], "--precision fp8: use auto, bf16, fp16, none"),
]

@pytest.mark.parametrize('args, contains', BAD, ids=[' '.join(a)[:40] for a, _ in BAD])
def test_bad_flag(args, contains, tmp_path, monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, [*TINY, '--out', tmp_path/'o', '--cache_dir', tmp_path/'c', *args])   # the last wins
    one_line_error(code, err, contains)
    assert not (tmp_path/'c').exists()                                  # refused before any extraction


@pytest.mark.parametrize('name, content', [('w.pth', b'not a checkpoint'), ('w.pth', None), ('w.safetensors', b'\xff' * 8 + b'{}'),
                                           ('w.safetensors', (2**40).to_bytes(8, 'little') + b'{')])
def test_bad_checkpoint_file(name, content, tmp_path, monkeypatch, capsys):
    "`--checkpoint` with garbage, a pickle that would run code (None), a bad or oversized safetensors header"
    f, contains = tmp_path/name, 'cannot be read as tensors'
    if content is None:
        class Plant:
            def __reduce__(self): return (os.system, (f"touch {tmp_path/'MARKER'}",))
        torch.save({'w': Plant()}, f)
    else: f.write_bytes(content)
    code, out, err = run_cli(monkeypatch, capsys, ['--encoder', 'vit_tiny_patch16_224', '--img_size', '32', '--checkpoint', f,
                                                   '--out', tmp_path/'o', '--cache_dir', tmp_path/'c', *TINY])
    one_line_error(code, err, contains)
    assert not (tmp_path/'MARKER').exists()


def test_planted_resume_checkpoint_runs_no_code(tmp_path, monkeypatch, capsys):
    "A pickle with a `__reduce__` planted as an interrupted run's checkpoint: `--resume` refuses it and nothing runs"
    class Plant:
        def __reduce__(self): return (os.system, (f"touch {tmp_path/'MARKER'}",))
    (tmp_path/'o'/'.partial').mkdir(parents=True)
    torch.save({'epoch': 0, 'model': {}, 'opt': {}, 'cbs': {}, 'x': Plant()}, tmp_path/'o'/'.partial'/'checkpoint.pth')
    code, out, err = run_cli(monkeypatch, capsys, ['--out', tmp_path/'o', '--resume', '--cache_dir', tmp_path/'c', *TINY])
    one_line_error(code, err, 'not a checkpoint that loads safely')
    assert not (tmp_path/'MARKER').exists()


def test_one_class_folder(tmp_path, monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, ['--data', folder(tmp_path/'d', classes=('a',)), '--out', tmp_path/'o',
                                                   '--cache_dir', tmp_path/'c', '--epochs', '1'])
    one_line_error(code, err, 'at least two')


def test_debug_shows_the_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, 'argv', ['ep_probe', '--seed', '-1', '--debug'])
    with pytest.raises(ValueError, match='--seed -1'): ep_probe(seed=-1, debug=True, out=str(tmp_path/'o'))


def test_busy_output_folder_names_the_pid(tmp_path):
    "A second run on an output folder in use fails at once, naming the PID that holds it, and leaves the folder alone"
    with out_lock(tmp_path/'o'):
        (tmp_path/'o'/'results.csv').write_text('earlier results')
        r = subprocess.run(['ep_probe', '--out', str(tmp_path/'o'), '--cache_dir', str(tmp_path/'c'), *TINY],
                           capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and 'Traceback' not in r.stderr, r.stderr
    assert r.stderr.strip() == (f"ep_probe: error: {tmp_path/'o'} is in use by another run (PID {os.getpid()}); wait for it to end "
                                "or choose another --out (--debug shows the traceback)")
    assert (tmp_path/'o'/'results.csv').read_text() == 'earlier results' and not (tmp_path/'c').exists()


def test_closed_pipe_still_writes_results(tmp_path):
    "`ep_probe | head -1` with an empty cache: the run finishes, writes its results and exits 0"
    cmd = f"ep_probe --out {tmp_path/'o'} --cache_dir {tmp_path/'c'} --probes lp,ep {' '.join(TINY)} | head -1; echo \"rc=${{PIPESTATUS[0]}}\""
    r = subprocess.run(['bash', '-c', cmd], capture_output=True, text=True, timeout=600)
    assert r.stdout.strip().splitlines()[-1] == 'rc=0', r.stdout + r.stderr
    assert 'Traceback' not in r.stderr and 'BrokenPipe' not in r.stderr, r.stderr
    assert (tmp_path/'o'/'results.csv').exists() and (tmp_path/'o'/'attention.png').exists()


@pytest.mark.parametrize('cmd, args, msg', [
    ('ep_probe', ['--probes', 'ep', '--epochs', '0'], '--epochs 0: must be an integer of at least 1'),
    ('ep_bench', ['--steps', '0'], '--steps 0: must be an integer of at least 1'),
    ('ep_pretrain', ['--epochs', '0'], '--epochs 0: must be an integer of at least 1'),
    ('ep_experiment', ['--seeds', 'abc'], '--seeds abc: give distinct non-negative integers separated by commas, e.g. 0,1,2')])
def test_flag_mistakes_fail_before_torch_loads(cmd, args, msg):
    "The console scripts check their simple flags before importing torch: an error exit costs a fraction of a second, not ~5-10 s"
    code = (f"import sys; sys.argv = {[cmd, *args]!r}\n"
            f"from ep_probing.cli import {cmd}_main\n"
            f"try: {cmd}_main()\n"
            "except SystemExit as e: print(e.code, 'torch' in sys.modules)")
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == ['2', 'False'], r.stdout + r.stderr
    assert r.stderr.strip() == f'{cmd}: error: {msg} (--debug shows the traceback)'


def test_timm_name_offline_never_probes_random_weights(tmp_path, monkeypatch, capsys):
    "A timm name means its pretrained weights: offline, with nothing cached, one line naming --checkpoint and --random_init"
    import huggingface_hub.constants as hc
    monkeypatch.setenv('HF_HUB_OFFLINE', '1'); monkeypatch.setenv('TORCH_HOME', str(tmp_path/'torch'))
    monkeypatch.setattr(hc, 'HF_HUB_CACHE', str(tmp_path/'hf'))
    code, out, err = run_cli(monkeypatch, capsys, ['--encoder', 'vit_tiny_patch16_224', '--img_size', '32',
                                                   '--out', tmp_path/'o', '--cache_dir', tmp_path/'c', *TINY])
    one_line_error(code, err, "the pretrained weights of 'vit_tiny_patch16_224' are not in the local cache")
    assert '--checkpoint' in err and '--random_init' in err and not (tmp_path/'c').exists()


def test_random_init_is_asked_for_and_reported(tmp_path, monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, ['--encoder', 'vit_tiny_patch16_224', '--img_size', '32', '--random_init', '--probes', 'lp',
                                                   '--blrs', 'none', '--out', tmp_path/'o', '--cache_dir', tmp_path/'c', *TINY])
    assert code == 0, err
    assert 'ep_probe: vit_tiny_patch16_224 (random init weights) on fashion_mnist' in out, out
    assert "random init: the encoder's weights are random (--random_init)" in out, out
    heads = json.loads(next((tmp_path/'o'/'heads').glob('*.json')).read_text())
    assert heads['weights'] == 'random init', heads


def test_console_script_exits_0_after_success(tmp_path, monkeypatch):
    "A command whose function returns a value (ep_pretrain returns its json) must still exit 0, printing nothing more"
    from ep_probing.cli import ep_pretrain_main
    monkeypatch.setattr(sys, 'argv', ['ep_pretrain', '--out', str(tmp_path/'vit'), '--epochs', '1', '--limit', '64', '--depth', '1',
                                      '--embed_dim', '24', '--num_heads', '2', '--decoder_dim', '16', '--decoder_depth', '1',
                                      '--patch_size', '7', '--bs', '32'])
    assert ep_pretrain_main() is None                        # the console wrapper does sys.exit(ep_pretrain_main())
    assert json.loads((tmp_path/'vit.json').read_text())['provenance']['epochs_done'] == 1
