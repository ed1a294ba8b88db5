"""The run folder and options, third trust pass (issue 48): a finished run is never replaced unasked and every file of a
run is published together; the process count is recorded; `RunConfig` refuses values of the wrong type; a tampered
checkpoint, a streamed `--logreg`, a live writer's temporary shard, and image-folder classes that cannot be one
class each get one line (or a warning) before any work."""
import json, os, socket, subprocess, sys
from pathlib import Path
import pytest, torch
from PIL import Image
from ep_probing.config import RunConfig
from ep_probing.shards import start_cache
from ep_probing.data import image_folder
from ep_probing.pipeline import run_probing
from test_bad_inputs_probe import run_cli, one_line_error, TINY
from test_trust_run import interrupted_run

FAST = [*TINY, '--probes', 'gap', '--blrs', '0.1']               # one head: the least training a run can do


def files(d:Path)->dict:
    "Every file under `d` (but the lock) and its bytes"
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob('*')) if p.is_file()
            and p.name != '.lock'}


def test_a_finished_run_survives_every_command_without_overwrite(tmp_path, monkeypatch, capsys):
    "48.1/48.3/48.4: refused, then `--overwrite` replaces the run's own files; the user's file and nothing stale stays"
    out, c = tmp_path/'o', tmp_path/'c'
    code, _, err = run_cli(monkeypatch, capsys, [*FAST, '--knn', '--out', out, '--cache_dir', c])
    assert code == 0, err
    (out/'logreg.json').write_text('{}')                                     # as an earlier --logreg run left it
    meta = json.loads((out/'meta.json').read_text())
    assert (meta['world_size'], meta['global_batch']) == (1, 256)              # one process of the default --bs
    (out/'notes.txt').write_text('mine'); before = files(out)
    assert {'knn.json', 'logreg.json', 'notes.txt'} <= set(before)
    code, _, err = run_cli(monkeypatch, capsys, [*FAST, '--out', out, '--cache_dir', c])
    one_line_error(code, err, f'{out} holds a finished run (mae_fmnist on fashion_mnist_sample, finished 20')
    assert '--train_size 500, --test_size 200, --epochs 1' in err and 'give --overwrite to replace it' in err
    code, _, err = run_cli(monkeypatch, capsys, [*FAST, '--out', out, '--cache_dir', c, '--resume'])
    one_line_error(code, err, f'--resume: the run in {out} is finished, nothing to resume')
    code, _, err = run_cli(monkeypatch, capsys, [*FAST, '--out', out, '--cache_dir', c, '--resume', '--seed', '1'])
    one_line_error(code, err, 'nothing to resume')
    assert 'it had --seed 0 but this command gives --seed 1' in err
    assert files(out) == before                                                 # byte for byte, nothing lost
    code, _, err = run_cli(monkeypatch, capsys, [*FAST, '--out', out, '--cache_dir', c, '--overwrite', '--seed', '1'])
    assert code == 0, err
    left = set(files(out))
    assert 'knn.json' not in left and 'logreg.json' not in left              # the earlier run's: gone
    assert (out/'notes.txt').read_text() == 'mine' and json.loads((out/'meta.json').read_text())['seed'] == 1


def test_an_interrupted_overwrite_keeps_the_finished_run_until_it_ends(tmp_path, monkeypatch, capsys):
    "48.1: `--overwrite` stopped after epoch 1 leaves the finished run byte for byte; `--resume` then replaces it"
    from ep_probing.engine import Checkpoint
    out, c = tmp_path/'o', tmp_path/'c'
    code, _, err = run_cli(monkeypatch, capsys, [*FAST, '--out', out, '--cache_dir', c]); assert code == 0, err
    before = files(out)
    save = Checkpoint.after_epoch
    def after_epoch(self):
        save(self)
        if self.epoch == 0: raise KeyboardInterrupt
    monkeypatch.setattr(Checkpoint, 'after_epoch', after_epoch)
    again = [*FAST, '--epochs', '2', '--out', out, '--cache_dir', c, '--overwrite']
    code, _, err = run_cli(monkeypatch, capsys, again)
    assert code == 130 and 'continue with --resume' in err, err
    assert {k: v for k, v in files(out).items() if not k.startswith('.partial/')} == before
    monkeypatch.setattr(Checkpoint, 'after_epoch', save)
    code, _, err = run_cli(monkeypatch, capsys, [*again[:-1], '--resume']); assert code == 0, err
    assert json.loads((out/'meta.json').read_text())['epochs'] == 2 and not (out/'.partial').exists()


def test_resume_across_another_process_count_says_the_global_batch_changed(tmp_path, monkeypatch, capsys,
                                                                         stop_after_epoch_1):
    "48.4: a run recorded with 2 processes of --bs 256, resumed by one: one line, not '--lrs'; nothing lost"
    out, ck = interrupted_run(tmp_path, monkeypatch, capsys)
    rec = out/'.partial'/'run.json'
    r = json.loads(rec.read_text())
    assert (r['world_size'], r['global_batch']) == (1, 256)
    r.update(world_size=2, global_batch=512); rec.write_text(json.dumps(r))
    code, _, err = run_cli(monkeypatch, capsys, [*TINY, '--epochs', '3', '--out', out, '--cache_dir', tmp_path/'c',
                                                 '--resume'])
    one_line_error(code, err, '--resume: the global batch changed: the interrupted run in')
    assert ('a global batch of 512 (2 processes x batch 256) but this command gives a global batch of 256 '
            '(1 process x batch 256)') in err and '--lrs' not in err
    assert (out/'.partial'/'checkpoint.pth').read_bytes() == ck


def test_tampered_checkpoint_counters(tmp_path, monkeypatch, capsys, stop_after_epoch_1):
    "48.10: counters outside the record, or a callback state of the wrong type: one line each, nothing trained"
    out, _ = interrupted_run(tmp_path, monkeypatch, capsys)
    ck = out/'.partial'/'checkpoint.pth'; good = ck.read_bytes()
    for tamper, says in [(lambda s: s.update(epoch=10**9), "its epoch 1000000000 is not one of the run's 3 epochs"),
                         (lambda s: s.update(epoch=-5), "its epoch -5 is not one of the run's 3 epochs"),
                         (lambda s: s['cbs'].update(BestHeads=dict(best=[], states={}, history={})),
                          "BestHeads's best is a list")]:
        ck.write_bytes(good); state = torch.load(ck, weights_only=True); tamper(state); torch.save(state, ck)
        before = files(out)
        code, _, err = run_cli(monkeypatch, capsys, [*TINY, '--epochs', '3', '--out', out, '--cache_dir',
                                                     tmp_path/'c', '--resume'])
        one_line_error(code, err, f'cannot resume from {ck}: {says}')
        assert err.rstrip().endswith('; start again with no --resume (--debug shows the traceback)'), err
        assert files(out) == before                                              # nothing trained, nothing written


@pytest.mark.parametrize('kw, says', [
    (dict(stream='no'), "stream='no': give True or False"), (dict(pretrained='no'), "pretrained='no'"),
    (dict(resume='false'), "resume='false'"), (dict(knn='no'), "knn='no'"), (dict(overwrite=1), 'overwrite=1'),
    (dict(epochs='3'), "epochs='3': must be an integer of at least 1"), (dict(bs='64'), "bs='64'"),
    (dict(epochs=0), 'epochs=0: must be an integer of at least 1'), (dict(out=123), 'out=123: give a path'),
    (dict(cache_dir=None), 'cache_dir=None: give a path'), (dict(train_size=1.5), 'train_size=1.5')])
def test_run_config_checks_types_in_the_callers_words(kw, says):
    "48.9: from Python, a value of the wrong type is refused when the config is made, named as the caller wrote it"
    with pytest.raises(ValueError, match=None) as e: RunConfig(**kw)
    assert says in str(e.value), str(e.value)


def test_logreg_with_stream_warns_before_any_work(tmp_path, monkeypatch, capsys):
    "48.8: `--logreg --stream` says the regression is skipped, as `--knn --stream` does, before the data is read"
    code, _, err = run_cli(monkeypatch, capsys, [*FAST, '--stream', '--logreg', '--data', tmp_path/'none',
                                                 '--out', tmp_path/'o', '--cache_dir', tmp_path/'c'])
    assert code == 2 and 'ep_probe: warning: --logreg needs cached tokens; it is skipped with --stream' in err, err


def test_start_cache_keeps_a_live_writers_shard(tmp_path):
    "48.16: only temporary shards whose writer (host and PID in the name) is gone are removed"
    gone = subprocess.Popen([sys.executable, '-c', 'pass']); gone.wait()
    host = socket.gethostname()
    live, other, dead = (f'.tmp-shard_00000-{host}-{os.getpid()}', f'.tmp-shard_00001-elsewhere-{gone.pid}',
                         f'.tmp-shard_00002-{host}-{gone.pid}')
    for n in (live, other, dead): (tmp_path/n).mkdir(); (tmp_path/n/'patch.npy').write_bytes(b'x')
    start_cache(tmp_path, {}, dict(n=1))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live, other, 'meta.json'])


def folder(root:Path, classes, n=2, test=None):
    "train/ and test/ image folders, `n` PNGs per class"
    for split, cs in (('train', classes), ('test', test or classes)):
        for c in cs:
            (root/split/c).mkdir(parents=True, exist_ok=True)
            for i in range(n): Image.new('RGB', (16, 16), (60 * i, 90, 30)).save(root/split/c/f'{i}.png')
    return root


def test_a_class_with_no_readable_training_image_is_refused(tmp_path, monkeypatch, capsys):
    "48.11: every training image of class b is broken: one line naming the class folder, nothing written"
    d = folder(tmp_path/'d', ['a', 'b'])
    for f in (d/'train'/'b').iterdir(): f.write_bytes(b'not an image')
    code, _, err = run_cli(monkeypatch, capsys, [*FAST, '--data', d, '--out', tmp_path/'o', '--cache_dir', tmp_path/'c'])
    lines = [l for l in err.splitlines() if 'warning' not in l]
    one_line_error(code, '\n'.join(lines), f"every image of the class folder {d/'train'/'b'} is unreadable")
    assert not (tmp_path/'c').exists()


def test_class_names_with_a_tab_or_newline_are_refused(tmp_path, monkeypatch, capsys):
    "48.12: a class folder named 'a<TAB>b' would break ep_predict's tab-separated output: one line naming it"
    d, name = folder(tmp_path/'d', ['a\tb', 'c']), 'a\tb'
    code, _, err = run_cli(monkeypatch, capsys, [*FAST, '--data', d, '--out', tmp_path/'o', '--cache_dir', tmp_path/'c'])
    one_line_error(code, err, f"the class folder {str(d/'train'/name)!r} has a newline or tab in its name")


def test_unicode_forms_of_a_class_name_are_one_class(tmp_path):
    "48.24: 'Café' in NFC for train, NFD for test (as macOS writes it): one class, in the same order"
    d = folder(tmp_path/'d', ['Caf\xe9', 'Cafz'], test=['Cafe\u0301', 'Cafz'])
    tr, te = image_folder(d/'train'), image_folder(d/'test')
    assert tr.classes == te.classes == ['Cafz', 'Caf\xe9']
    assert [Path(p).parent.name for p, y in te.samples if y == 1] == ['Cafe\u0301'] * 2


def test_a_linked_class_folder_is_named_not_the_real_one(tmp_path):
    "48.24: class 'a' is a link to class 'b': the message names the link, not 'b' as holding no images"
    d = folder(tmp_path/'d', ['b'])
    (d/'train'/'a').symlink_to(d/'train'/'b')
    with pytest.raises(FileNotFoundError) as e: image_folder(d/'train')
    assert f"{d/'train'/'a'} (a link to {d/'train'/'b'})" in str(e.value) and 'hold the same images' in str(e.value)


def test_python_refusals_name_the_argument(tmp_path):
    "A finished run from Python: `overwrite=True`, not the flag"
    out = tmp_path/'o'; out.mkdir(); (out/'results.json').write_text('[]'); (out/'meta.json').write_text('{}')
    with pytest.raises(ValueError, match=r'holds a finished run \(unknown encoder on unknown data, finished .*give '
                                         r'overwrite=True to replace it'):
        run_probing(probes='gap', epochs=1, train_size=100, test_size=50, out=out, cache_dir=tmp_path/'c', progress=False)
