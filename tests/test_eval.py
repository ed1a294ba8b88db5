"""`ep_eval` (issue 41, point 2): a head that `ep_probe` trained gives, on the run's cached test tokens, exactly the
test top-1 the run recorded; a head in the paper code's release format runs and prints both numbers; every user
mistake is one line `ep_eval: error: ...` with exit 2, found before any token is extracted."""
from functools import partial
import json, os, re, sys
import pytest, torch
from PIL import Image
from ep_probing.heads import save_head
from ep_probing.trained import ep_eval, eval_head, head_of, export_head, run_head
from ep_probing.cli import ep_probe
from ep_probing.probes import create_probe
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import console   # noqa: E402
from test_heads import release_state, write_release   # noqa: E402   (the release format, built by the tests)

run_cli = partial(console.run_cli, ep_eval)   # `(monkeypatch, capsys, args)` -> `(code, out, err)`


def one_line_error(code, err, contains):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and 'Traceback' not in err, err
    assert lines[0].startswith('ep_eval: error: ') and contains in lines[0], lines[0]


def numbers(out):
    "The printed test top-1 and recorded top-1, in percent"
    test = re.search(r'^test top-1  ([\d.]+)%', out, re.M); rec = re.search(r'^recorded    ([\d.]+)%', out, re.M)
    assert test and rec, out
    return float(test.group(1)), float(rec.group(1))


@pytest.fixture(scope='module')
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp('evalrun')
    ep_probe(probes='lp,ep', epochs=1, train_size=300, test_size=100, out=str(root/'out'), cache_dir=str(root/'cache'))
    return root/'out'


def cache_entries(run): return sorted(p.name for p in (run.parent/'cache').iterdir())


def row_of(run, probe): return next(r for r in json.loads((run/'results.json').read_text()) if r['probe'] == probe)


@pytest.mark.parametrize('probe', ['ep', 'lp'])
def test_eval_gives_the_runs_test_top1(probe, run, monkeypatch, capsys):
    before, row = cache_entries(run), row_of(run, probe)
    r = eval_head(run_head(run, probe), cache_dir=str(run.parent/'cache'), progress=False)
    assert r['top1'] == row['test_top1'] and r['n_test'] == 100 and not r['extracted'], (r, row['test_top1'])
    code, out, err = run_cli(monkeypatch, capsys, ['--head', run, '--probe', probe, '--cache_dir', run.parent/'cache'])
    assert code == 0, err
    test, rec = numbers(out)
    assert test == rec == round(100 * row['test_top1'], 2) and 'test top-1 recorded by its run' in out, out
    assert '(from the cache)' in out and cache_entries(run) == before        # the run's tokens, reused: none extracted


def test_eval_head_stem_and_hub_folder(run, tmp_path, monkeypatch, capsys):
    row = row_of(run, 'ep')
    for head in (run/'heads'/'ep', export_head(run, tmp_path/'hub', probe='ep')):
        code, out, err = run_cli(monkeypatch, capsys, ['--head', head, '--cache_dir', run.parent/'cache'])
        assert code == 0, err
        assert numbers(out) == (round(100 * row['test_top1'], 2),) * 2 and '(from the cache)' in out, out


def test_eval_release_head(run, tmp_path, monkeypatch, capsys):
    "The run's EP head, written in the paper code's release format: it loads and gives the run's test top-1"
    h, row = run_head(run, 'ep'), row_of(run, 'ep')
    rel = write_release(tmp_path/'linprobe_mae_ep_q32_d1_fmnist', h, 'ep', head_epoch=0, table_best_acc1=99.0,
                        val_acc1_at_head_epoch=round(100 * row['test_top1'], 2))
    assert set(torch.load(rel/'ep_head.pth', weights_only=True)['state_dict']) == set(release_state(h))
    args = ['--head', rel, '--encoder', 'mae_fmnist', '--data', 'fashion_mnist_sample', '--test_size', 100,
            '--cache_dir', run.parent/'cache']
    code, out, err = run_cli(monkeypatch, capsys, args)
    assert code == 0, err
    assert numbers(out) == (round(100 * row['test_top1'], 2),) * 2, out
    assert "the release's top-1 at its epoch 0 (the table's best epoch: 99.00%)" in out, out


def test_eval_user_errors(run, tmp_path, monkeypatch, capsys):
    cache = tmp_path/'cache'                         # nothing may be extracted before a mistake is found
    err = lambda args, contains: one_line_error(*run_cli(monkeypatch, capsys, [*args, '--cache_dir', cache])[::2],
                                                contains)
    err([], 'pass --head')
    err(['--head', tmp_path/'nope.pth'], 'no file')
    err(['--head', tmp_path/'nope'], 'no saved head at')
    save_head(create_probe('ep', 64, 10), tmp_path/'narrow', encoder='mae_fmnist', data='fashion_mnist_sample')
    err(['--head', tmp_path/'narrow'], 'encoder \'mae_fmnist\' gives tokens of width 192 but the head reads width 64')
    for split in ('train', 'test'):                                        # an image folder of 3 classes
        for c in 'abc':
            (tmp_path/'three'/split/c).mkdir(parents=True); Image.new('L', (28, 28)).save(tmp_path/'three'/split/c/'0.png')
    err(['--head', run, '--data', tmp_path/'three'], 'has 3 classes but the head predicts 10')
    rel = write_release(tmp_path/'row', create_probe('ep', 192, 10, num_queries=4), 'ep', model='vit_base_patch16')
    err(['--head', rel], "does not name its encoder (its metadata says model 'vit_base_patch16'); pass --encoder")
    err(['--head', rel/'ep_head.pth', '--probe', 'ep'], 'picks a probe of a run')
    err(['--head', run, '--probe', 'mhca'], '--probe mhca: the run at')
    assert not cache.exists() or not any(cache.iterdir())
    assert head_of(run, 'ep').meta['test_top1'] == row_of(run, 'ep')['test_top1']    # the run is untouched
