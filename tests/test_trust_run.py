"""The run, from a hostile user pass: `--resume` refuses any changed option that shapes the result, a recipe whose step
does not fit in an epoch and weight options that cannot apply are refused, a resumed log.csv goes on with the same
numbers, and a full disk, a closed stdout or a bad image read in a DataLoader worker each give one line."""
import os, subprocess, sys
from pathlib import Path
import pandas as pd, pytest, timm, torch
from safetensors.torch import save_file
from ep_probing import engine
from ep_probing.engine import read_checkpoint
from ep_probing.pipeline import run_probing
from test_bad_inputs_probe import run_cli, one_line_error, TINY
from tiny_datasets import make_tiny

root = Path(__file__).resolve().parents[1]


def interrupted_run(tmp_path, monkeypatch, capsys, *args):
    "A 3-epoch run stopped after epoch 1: its output folder, with the checkpoint's bytes"
    code, out, err = run_cli(monkeypatch, capsys, [*TINY, '--epochs', '3', '--out', tmp_path/'o', '--cache_dir',
                                                   tmp_path/'c', *args])
    assert code == 130 and 'interrupted after epoch 1 of 3; continue with --resume' in err, err
    return tmp_path/'o', (tmp_path/'o'/'.partial'/'checkpoint.pth').read_bytes()


@pytest.mark.parametrize('first, then, says', [
    ([], ['--stream'], 'has no --stream but this command gives --stream'),
    ([], ['--norm', 'on'], 'has --norm auto but this command gives --norm on'),
    (['--valid_pct', '0.2'], [], 'has --valid_pct 0.2 but this command gives --valid_pct 0.1'),
    ([], ['--train_size', '400'], 'has --train_size 500 but this command gives --train_size 400')])
def test_resume_refuses_a_changed_option(first, then, says, tmp_path, monkeypatch, capsys, stop_after_epoch_1):
    "An option that changes the result, changed on `--resume`: one line naming its flag, before any work; nothing lost"
    out, ck = interrupted_run(tmp_path, monkeypatch, capsys, *first)
    caches = sorted(p.name for p in (tmp_path/'c').iterdir())
    code, _, err = run_cli(monkeypatch, capsys, [*TINY, '--epochs', '3', '--out', out, '--cache_dir', tmp_path/'c',
                                                 '--resume', *then])
    one_line_error(code, err, says)
    assert (out/'.partial'/'checkpoint.pth').read_bytes() == ck                       # the interrupted run is intact
    assert sorted(p.name for p in (tmp_path/'c').iterdir()) == caches                 # refused before extraction


def test_resume_check_speaks_python(tmp_path, monkeypatch, capsys, stop_after_epoch_1):
    "From Python, the same refusal names the argument"
    out, _ = interrupted_run(tmp_path, monkeypatch, capsys)
    with pytest.raises(ValueError, match='has stream=False but this command gives stream=True'):
        run_probing(epochs=3, train_size=500, test_size=200, out=out, cache_dir=tmp_path/'c', resume=True, stream=True,
                    progress=False)


def test_resumed_log_continues_the_same_numbers(tmp_path, monkeypatch, capsys, stop_after_epoch_1):
    "An interrupted and resumed run's log.csv is the uninterrupted run's, the time column aside"
    out, _ = interrupted_run(tmp_path, monkeypatch, capsys)
    code, _, err = run_cli(monkeypatch, capsys, [*TINY, '--epochs', '3', '--out', out, '--cache_dir', tmp_path/'c',
                                                 '--resume'])
    assert code == 0, err
    code, _, err = run_cli(monkeypatch, capsys, [*TINY, '--epochs', '3', '--out', tmp_path/'whole', '--cache_dir',
                                                 tmp_path/'c'])
    assert code == 0, err
    resumed, whole = (pd.read_csv(d/'log.csv').drop(columns='time') for d in (out, tmp_path/'whole'))
    assert len(whole) == 3 and whole.train_loss.notna().all()
    pd.testing.assert_frame_equal(resumed, whole, check_exact=True)


def test_a_record_older_than_an_option_is_refused_saying_so(tmp_path, monkeypatch, capsys, stop_after_epoch_1):
    "A run interrupted before `--decode` existed (its run.json lacks it): one line that says why, nothing lost"
    import json
    out, ck = interrupted_run(tmp_path, monkeypatch, capsys)
    rec = out/'.partial'/'run.json'
    old = json.loads(rec.read_text()); del old['decode']; rec.write_text(json.dumps(old))
    code, _, err = run_cli(monkeypatch, capsys, [*TINY, '--epochs', '3', '--out', out, '--cache_dir', tmp_path/'c',
                                                 '--resume'])
    one_line_error(code, err, 'was recorded by an older ep_probing, before --decode existed, so it cannot be resumed '
                              'with certainty; start again with no --resume')
    assert (out/'.partial'/'checkpoint.pth').read_bytes() == ck and json.loads(rec.read_text()) == old


def test_paper_recipe_on_fewer_images_than_its_batch(tmp_path, monkeypatch, capsys):
    """`--recipe paper` steps once per 4096 images: on 450 training images, refused before any training, naming the
    recipe (the user did not type --accum_bs 4096), with the fix"""
    code, _, err = run_cli(monkeypatch, capsys, [*TINY, '--recipe', 'paper', '--out', tmp_path/'o',
                                                 '--cache_dir', tmp_path/'c'])
    one_line_error(code, err, "--recipe paper: the paper's recipe steps on 4,096 images (--accum_bs 4096) but an "
                              "epoch has 450 training images")
    assert 'e.g. --accum_bs 256' in err
    assert not (tmp_path/'o'/'.partial').exists() and not (tmp_path/'o'/'log.csv').exists()


def tiny_vit_file(tmp_path)->Path:
    "A local checkpoint of `vit_tiny_patch16_224` built at 32 px"
    f = tmp_path/'w.safetensors'
    save_file(timm.create_model('vit_tiny_patch16_224', pretrained=False, img_size=32, num_classes=0).state_dict(), f)
    return f


@pytest.mark.parametrize('args, says', [
    (['--checkpoint', 'FILE'], '--checkpoint loads a file into a timm model, but the encoder mae_fmnist is a shipped'),
    (['--random_init'], '--random_init builds a timm model with random weights, but the encoder mae_fmnist'),
    (['--encoder', 'vit_tiny_patch16_224', '--img_size', '32', '--random_init', '--checkpoint', 'FILE'],
     '--random_init and --checkpoint both choose the weights')])
def test_weights_that_cannot_apply(args, says, tmp_path, monkeypatch, capsys):
    "Weight options are refused where they cannot apply, never dropped"
    f = tiny_vit_file(tmp_path)
    code, _, err = run_cli(monkeypatch, capsys, [*TINY, '--out', tmp_path/'o', '--cache_dir', tmp_path/'c',
                                                 *[f if a == 'FILE' else a for a in args]])
    one_line_error(code, err, says)
    assert not (tmp_path/'c').exists()


def test_full_disk_while_checkpointing(tmp_path, monkeypatch, capsys):
    "torch.save's 'enforce fail' on a full disk: one line saying what was kept and how to resume; then it resumes"
    out, c = tmp_path/'o', tmp_path/'c'
    code, _, err = run_cli(monkeypatch, capsys, [*TINY, '--out', out, '--cache_dir', c])
    assert code == 0, err
    before = {f: (out/f).read_bytes() for f in ('results.csv', 'results.json', 'log.csv')}
    save = torch.save
    def full(obj, f, *a, **k):
        if 'checkpoint.pth' in str(f) and obj['epoch'] >= 1:
            raise RuntimeError('[enforce fail at inline_container.cc:603] . unexpected pos 64 vs 0')
        return save(obj, f, *a, **k)
    monkeypatch.setattr(engine.torch, 'save', full)
    code, _, err = run_cli(monkeypatch, capsys, [*TINY, '--epochs', '3', '--out', out, '--cache_dir', c, '--overwrite'])
    one_line_error(code, err, 'cannot write the checkpoint')
    assert 'after epoch 2 (the disk may be full); the checkpoint after epoch 1 is kept: free space, then continue ' \
           'with --resume' in err
    assert read_checkpoint(out/'.partial'/'checkpoint.pth')['epoch'] == 0
    assert {f: (out/f).read_bytes() for f in before} == before                 # the earlier results are untouched
    monkeypatch.setattr(engine.torch, 'save', save)
    code, _, err = run_cli(monkeypatch, capsys, [*TINY, '--epochs', '3', '--out', out, '--cache_dir', c, '--resume'])
    assert code == 0, err
    assert pd.read_csv(out/'log.csv').epoch.tolist() == [0, 1, 2]


def test_stdout_closed(tmp_path):
    "`ep_probe ... >&-`: the run goes on and writes its results; nothing on stderr but its progress"
    wrapper = "import sys; sys.argv = ['ep_probe', *sys.argv[1:]]; from ep_probing.cli import ep_probe_main; ep_probe_main()"
    args = ' '.join(['--train_size', '100', '--test_size', '50', '--epochs', '1', '--probes', 'gap',
                     '--out', str(tmp_path/'o'), '--cache_dir', str(tmp_path/'c')])
    r = subprocess.run(['sh', '-c', f'"{sys.executable}" -c "{wrapper}" {args} >&-'], capture_output=True, text=True,
                       timeout=600, env={**os.environ, 'PYTHONPATH': str(root)}, cwd=tmp_path)
    assert r.returncode == 0 and 'Traceback' not in r.stderr, r.stderr[-3000:]
    assert (tmp_path/'o'/'results.csv').is_file()


def test_bad_image_read_in_a_worker(tmp_path, monkeypatch, capsys):
    "With `--workers 2`, an image that cannot be read gives the original error's one line, not the worker's traceback"
    # streamed: the image is first read in a worker (a cached run's fingerprint reads this tiny set in the main process)
    root = make_tiny('dtd', tmp_path/'data')
    (root/'dtd'/'dtd'/'images'/'braided'/'braided_0002.jpg').write_bytes(b'\xff\xd8 not a jpeg')
    code, _, err = run_cli(monkeypatch, capsys, ['--data', 'dtd', '--data_path', root, '--workers', '2', '--epochs', '1',
                                                 '--stream', '--bs', '4', '--out', tmp_path/'o', '--cache_dir', tmp_path/'c'])
    errors = [l for l in err.splitlines() if not l.startswith('ep_probe: warning: dtd: 3 classes')]   # a tiny copy
    one_line_error(code, '\n'.join(errors), 'braided_0002.jpg')
    assert 'worker' not in err and len(errors[0]) < 400, err
