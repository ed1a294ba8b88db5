"""A finished run survives every command that is not told `--overwrite` (issue 48, "done when"): each command a user
may point at a run folder either reads it or refuses in one line, and the run's files keep their bytes. `--overwrite`
then replaces the run's own files, none of the user's, and leaves nothing of the earlier run behind."""
import json, os, sys
from pathlib import Path
import pytest
from ep_probing.cli import ep_probe
from ep_probing.data import fmnist_sample
from ep_probing.leaderboard import ep_compare, ep_leaderboard
from ep_probing.trained import ep_eval, ep_predict
from ep_probing.viz import ep_attention
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from console import run_cli   # noqa: E402
from test_trust_heads import snapshot   # noqa: E402

TINY = ['--train_size', '300', '--test_size', '100', '--epochs', '1', '--probes', 'lp,ep', '--blrs', '0.01']


@pytest.fixture(scope='module')
def run(tmp_path_factory):
    "A tiny finished run with its k-NN file, an image of its data, and its feature cache"
    root = tmp_path_factory.mktemp('survive')
    code = ep_probe(probes='lp,ep', blrs='0.01', epochs=1, train_size=300, test_size=100, knn=True,
                    out=str(root/'run'), cache_dir=str(root/'cache'))
    assert code in (None, 0) and (root/'run'/'knn.json').exists()
    fmnist_sample('test')[0][0].save(root/'a.png')
    return root


def refused(code, out, err, cmd, *says):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and 'Traceback' not in err, err
    assert lines[0].startswith(f'{cmd}: error: ') and all(s in lines[0] for s in says), lines[0]


def commands(r:Path):
    "`(name, command, arguments, expected)`: expected is 'ok' or the words of the one-line refusal"
    R, c = r/'run', ['--cache_dir', r/'cache']
    return [
        ('same options', ep_probe, [*TINY, '--knn', '--out', R, *c], ('holds a finished run', '--overwrite')),
        ('other options', ep_probe, [*TINY, '--epochs', '2', '--out', R, *c], ('holds a finished run', '--overwrite')),
        ('resume', ep_probe, [*TINY, '--knn', '--out', R, '--resume', *c], ('finished, nothing to resume',)),
        ('resume, other options', ep_probe, [*TINY, '--epochs', '2', '--out', R, '--resume', *c],
         ('finished, nothing to resume', '--epochs 2')),
        ('predict', ep_predict, [R, r/'a.png'], 'ok'),
        ('eval', ep_eval, ['--head', R, *c], 'ok'),
        ('attention elsewhere', ep_attention, [r/'a.png', R/'heads'/'ep_blr=0p01', '--out', r/'attn'], 'ok'),
        ('leaderboard', ep_leaderboard, [R], 'ok'),
        ('leaderboard into the run', ep_leaderboard, [R, '--out', R], ('--out',)),
        ('compare into the run', ep_compare, [R, '--out', R], ('--out',)),
    ]


def test_a_finished_run_survives_every_command(run, monkeypatch, capsys):
    before = snapshot(run/'run')
    assert {'results.json', 'meta.json', 'knn.json', 'log.csv'} <= set(before)
    for name, cmd, args, expected in commands(run):
        code, out, err = run_cli(cmd, monkeypatch, capsys, args)
        if expected == 'ok': assert code in (0, None), (name, err)
        else: refused(code, out, err, cmd.__name__, *expected)
        assert snapshot(run/'run') == before, name                      # not a byte of the run changed


def test_overwrite_replaces_the_run_files_alone(run, monkeypatch, capsys):
    "`--overwrite`: the new run's files, none of the old run's (its knn.json), and the user's own file kept"
    (run/'run'/'notes.txt').write_text('mine')
    old = json.loads((run/'run'/'results.json').read_text())
    code, out, err = run_cli(ep_probe, monkeypatch, capsys,
                             [*TINY, '--epochs', '2', '--overwrite', '--out', run/'run', '--cache_dir', run/'cache'])
    assert code in (0, None), err
    assert (run/'run'/'notes.txt').read_text() == 'mine'
    assert not (run/'run'/'knn.json').exists()                         # the earlier run's, not this one's
    assert json.loads((run/'run'/'meta.json').read_text())['epochs'] == 2
    assert json.loads((run/'run'/'results.json').read_text()) != old
