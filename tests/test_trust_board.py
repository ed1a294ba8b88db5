"""`ep_leaderboard` and `ep_compare` against a hostile user: they write only under an explicit `--out` that is new or
theirs (a run and other files are left alone), the command they record runs, a run counts once however it is named,
unknown probes fail, and tampered `results.json`/`meta.json`/`knn.json` give one line naming the file. Run in this
process, as each console script does; the run folders are written here in the format `ep_probe` writes."""
import json, shlex, shutil, sys
from pathlib import Path
import numpy as np, pytest
from ep_probing.stats import pack_correct
from ep_probing.leaderboard import ep_leaderboard, ep_compare
sys.path.insert(0, str(Path(__file__).parent))
from console import run_cli   # noqa: E402




def one_line_error(cmd, code, err, *contains):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and 'Traceback' not in err, err
    assert lines[0].startswith(f'{cmd}: error: ') and all(c in lines[0] for c in contains), (lines[0], contains)


def fake_run(d, seed=0, acc=(0.80, 0.90), knn=0.75, n=200):
    "A finished run as ep_probe leaves it: results.json (with per-image results), meta.json, knn.json, a log"
    d = Path(d); d.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    rows = [dict(probe=p, name=p, params=k, blr=b, test_top1=None, n_test=n, best_epoch=3, train_s=1.5 + seed,
                 test_correct=None) for p, k, b in (('lp', 1930, 0.1), ('ep', 7840, 0.03))]
    for r, a in zip(rows, acc):
        c = rng.random(n) < a
        r.update(test_top1=float(c.mean()), test_correct=pack_correct(c))
    (d/'results.json').write_text(json.dumps(rows, indent=1))
    (d/'results.csv').write_text('probe,test top-1\nlp,0.8\nep,0.9\n')
    (d/'meta.json').write_text(json.dumps(dict(encoder='mae_fmnist', weights='shipped', data='fashion_mnist_sample',
                                               seed=seed, n_test=n, test_id='t0', epochs=1, opt='adamw')))
    (d/'knn.json').write_text(json.dumps({'cls': dict(top1=knn, k=20, T=0.07)}))
    (d/'log.csv').write_text('epoch,loss\n0,1.0\n')
    return d


def snapshot(folder)->dict:
    "Every file under `folder` and its bytes"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob('*')) if p.is_file()}


@pytest.fixture
def runs(tmp_path):
    "Two runs of one backbone (seeds 0 and 1) tested on the same images"
    return fake_run(tmp_path/'r0', 0), fake_run(tmp_path/'r1', 1, acc=(0.82, 0.86))


# 1. Results lost: files only under an explicit --out, which must be new or theirs

def test_out_inside_a_run_leaves_the_run_alone(runs, tmp_path, monkeypatch, capsys):
    "The issue's `--out R1/results` used to replace R1's results.json and results.csv: now it is a new folder"
    before = snapshot(tmp_path)
    code, out, err = run_cli(ep_leaderboard, monkeypatch, capsys, [*runs, '--out', runs[0]/'results'])
    assert code == 0, err
    after = snapshot(tmp_path)
    assert {k: after[k] for k in before} == before                                   # nothing replaced
    assert sorted(set(after) - set(before)) == [f'r0/results/leaderboard.{s}' for s in ('csv', 'json', 'md', 'png')]


@pytest.mark.parametrize('cmd', [ep_leaderboard, ep_compare])
def test_out_holding_a_run_is_refused(cmd, runs, tmp_path, monkeypatch, capsys):
    before = snapshot(tmp_path)
    code, out, err = run_cli(cmd, monkeypatch, capsys, [*runs, '--out', runs[0]])
    one_line_error(cmd.__name__, code, err, f'--out {runs[0]} holds an ep_probe run (', '--force to write beside them')
    assert snapshot(tmp_path) == before and out == ''


def test_no_out_prints_and_writes_nothing(runs, tmp_path, monkeypatch, capsys):
    "No --out: the table goes to the terminal; the current folder (with a leaderboard.md of the user's) is untouched"
    here = tmp_path/'here'; here.mkdir(); (here/'leaderboard.md').write_text('# my own notes\n')
    monkeypatch.chdir(here)
    before = snapshot(tmp_path)
    code, out, err = run_cli(ep_leaderboard, monkeypatch, capsys, runs)
    assert code == 0 and err == '', err
    assert out.startswith('| backbone | weights | data | seeds | k-NN | lp | ep |') and '| 0,1 |' in out, out
    assert snapshot(tmp_path) == before
    code, out, err = run_cli(ep_compare, monkeypatch, capsys, runs)
    assert code == 0 and out.startswith('lp in r0 vs lp in r1: ') and snapshot(tmp_path) == before, out + err


@pytest.mark.parametrize('cmd, own', [(ep_leaderboard, 'leaderboard.md'), (ep_compare, 'compare.txt')])
def test_out_with_other_files(cmd, own, runs, tmp_path, monkeypatch, capsys):
    "A folder of the user's is refused; `--force` writes beside the files, and never over one of the same name"
    o = tmp_path/'paper'; o.mkdir(); (o/'notes.txt').write_text('mine\n')
    before = snapshot(tmp_path)
    code, out, err = run_cli(cmd, monkeypatch, capsys, [*runs, '--out', o])
    one_line_error(cmd.__name__, code, err, f'--out {o} holds files {cmd.__name__} did not write (notes.txt)', '--force')
    assert snapshot(tmp_path) == before
    code, out, err = run_cli(cmd, monkeypatch, capsys, [*runs, '--out', o, '--force'])
    assert code == 0 and (o/own).is_file() and (o/'notes.txt').read_text() == 'mine\n', err
    (o/own).unlink(); (o/own).write_text('my own file\n')                            # the user's, under our name
    before = snapshot(tmp_path)
    code, out, err = run_cli(cmd, monkeypatch, capsys, [*runs, '--out', o, '--force'])
    one_line_error(cmd.__name__, code, err, f'holds {own}, which {cmd.__name__} did not write; move it away')
    assert snapshot(tmp_path) == before


def test_out_that_is_a_file(runs, tmp_path, monkeypatch, capsys):
    f = tmp_path/'board.md'; f.write_text('mine\n')
    code, out, err = run_cli(ep_leaderboard, monkeypatch, capsys, [*runs, '--out', f])
    one_line_error('ep_leaderboard', code, err, f'--out {f}: a file, not a folder')
    assert f.read_text() == 'mine\n'


@pytest.mark.parametrize('cmd, args, rec', [(ep_leaderboard, [], 'leaderboard.json'),
                                            (ep_compare, ['--probes', 'ep'], 'compare.json')])
def test_recorded_command_runs_and_rewrites_its_folder(cmd, args, rec, runs, tmp_path, monkeypatch, capsys):
    "The command in the record, run again from elsewhere, rewrites its own folder with the same files"
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(cmd, monkeypatch, capsys, ['r0', 'r1/', *args, '--out', 'board'])
    assert code == 0, err
    first = snapshot(tmp_path/'board')
    argv = shlex.split(json.loads(first[rec])['command'])
    assert argv[0] == cmd.__name__ and '--runs' not in argv, argv
    elsewhere = tmp_path/'elsewhere'; elsewhere.mkdir(); monkeypatch.chdir(elsewhere)
    code, out, err = run_cli(cmd, monkeypatch, capsys, argv[1:])
    assert code == 0, err
    assert snapshot(tmp_path/'board') == first and not any(elsewhere.iterdir())


def test_own_output_among_the_runs(runs, tmp_path, monkeypatch, capsys):
    "`ep_leaderboard runs/*` after `--out runs/board`: the board folder is named as such, not as a broken run"
    code, out, err = run_cli(ep_leaderboard, monkeypatch, capsys, [*runs, '--out', tmp_path/'board'])
    assert code == 0, err
    before = snapshot(tmp_path)
    code, out, err = run_cli(ep_leaderboard, monkeypatch, capsys, [*runs, tmp_path/'board', '--out', tmp_path/'board'])
    one_line_error('ep_leaderboard', code, err, f"{tmp_path/'board'}: no results.json",
                   'not what ep_leaderboard or ep_compare wrote: leave it out')
    assert snapshot(tmp_path) == before


# 2. Silent wrong results: one run counts once; unknown probes and one run twice fail

def _ep_cell(out:str)->str:
    "The 'ep' cell of the one row of a printed leaderboard"
    head, _, row = [l.strip('|').split(' | ') for l in out.strip().splitlines()[:3]]
    return dict(zip([h.strip() for h in head], [v.strip() for v in row]))['ep']


@pytest.mark.parametrize('how', ['twice', 'slash', 'copy'])
def test_one_run_counts_once(how, runs, tmp_path, monkeypatch, capsys):
    r0 = runs[0]
    other = {'twice': r0, 'slash': f'{r0}/', 'copy': shutil.copytree(r0, tmp_path/'r0_copy')}[how]
    code, out, err = run_cli(ep_leaderboard, monkeypatch, capsys, [r0, other])
    assert code == 0, err
    top1 = json.loads((r0/'results.json').read_text())[1]['test_top1']
    assert _ep_cell(out) == f"{100 * top1:.2f}", out                       # one value, not '... ± 0.00'
    said = 'holds the same results as' if how == 'copy' else 'is given twice; counted once'
    assert err.startswith('ep_leaderboard: warning: ') and said in err and len(err.strip().splitlines()) == 1, err


def test_repeated_rows_count_once(runs, monkeypatch, capsys):
    f = runs[0]/'results.json'; rows = json.loads(f.read_text()); f.write_text(json.dumps(rows + rows[1:]))
    code, out, err = run_cli(ep_leaderboard, monkeypatch, capsys, [runs[0]])
    assert code == 0 and _ep_cell(out) == f"{100 * rows[1]['test_top1']:.2f}", out + err
    assert err.strip() == f'ep_leaderboard: warning: {f}: 1 repeated rows of a probe counted once', err
    f.write_text(json.dumps(rows + [{**rows[1], 'test_top1': 0.5}]))
    code, out, err = run_cli(ep_leaderboard, monkeypatch, capsys, [runs[0]])
    one_line_error('ep_leaderboard', code, err, f"{f}: probe 'ep' has two different rows")


def test_compare_unknown_probes(runs, monkeypatch, capsys):
    code, out, err = run_cli(ep_compare, monkeypatch, capsys, [runs[0], '--probes', 'zzz'])
    one_line_error('ep_compare', code, err, f"--probes zzz: {runs[0]} has no probe 'zzz'; choose among lp, ep")
    code, out, err = run_cli(ep_compare, monkeypatch, capsys, [*runs, '--probes', 'lp,zzz'])
    one_line_error('ep_compare', code, err, "--probes lp,zzz: both runs have no probe 'zzz'; choose among lp, ep")
    assert out == ''


def test_compare_best_probe_alone(runs, monkeypatch, capsys):
    "One run and only its best probe (or a run of one probe): nothing to compare, said instead of an empty output"
    code, out, err = run_cli(ep_compare, monkeypatch, capsys, [runs[0], '--probes', 'ep'])
    one_line_error('ep_compare', code, err, 'nothing to compare with its best probe ep on test; name others with '
                   '--probes (lp)')
    f = runs[0]/'results.json'; f.write_text(json.dumps(json.loads(f.read_text())[:1]))
    code, out, err = run_cli(ep_compare, monkeypatch, capsys, [runs[0]])
    one_line_error('ep_compare', code, err, '(it trained no other); pass a second run')


@pytest.mark.parametrize('how, said', [('twice', 'are the same run'), ('slash', 'are the same run'),
                                       ('copy', 'hold the same results')])
def test_compare_a_run_with_itself(how, said, runs, tmp_path, monkeypatch, capsys):
    r0 = runs[0]
    other = {'twice': r0, 'slash': f'{r0}/', 'copy': shutil.copytree(r0, tmp_path/'r0_copy')}[how]
    code, out, err = run_cli(ep_compare, monkeypatch, capsys, [r0, other])
    one_line_error('ep_compare', code, err, f'{said}; pass two different runs')
    assert out == ''


# 3. Tampered files: one line naming the file

def _rows(f, **kw):
    "Set fields of the second row of results.json"
    rows = json.loads(f.read_text()); rows[1].update(kw); return json.dumps(rows)

def _meta(f, drop=None, **kw):
    m = json.loads(f.read_text()); m.update(kw); m.pop(drop, None); return json.dumps(m)

TAMPERED = [  # (id, file, new content from the old file, what the line says after the file's name)
    ('results garbage', 'results.json', lambda f: b'\xff\xfe{]', 'not JSON'),
    ('results not JSON', 'results.json', lambda f: '{"probe": ', 'not JSON'),
    ('results deep', 'results.json', lambda f: '[' * 100_000, 'not JSON'),
    ('results an object', 'results.json', lambda f: '{"probe": "lp"}', 'holds an object, not a list'),
    ('results empty', 'results.json', lambda f: '[]', 'holds no probe'),
    ('results row a list', 'results.json', lambda f: '[[1, 2]]', 'row 1 is a list, not an object'),
    ('results row text', 'results.json', lambda f: '["lp"]', 'row 1 is text, not an object'),
    ('top1 missing', 'results.json', lambda f: _rows(f, test_top1=None).replace('"test_top1": null, ', ''), "row 2 has no 'test_top1'"),
    ('top1 NaN', 'results.json', lambda f: _rows(f, test_top1=float('nan')), "row 2 'test_top1' is nan, not a number in [0, 1]"),
    ('top1 text', 'results.json', lambda f: _rows(f, test_top1='0.9'), "row 2 'test_top1' is '0.9', not a number in [0, 1]"),
    ('top1 infinite', 'results.json', lambda f: _rows(f).replace('"test_top1": 0.', '"test_top1": 1e999, "x": 0.'), "row 1 'test_top1' is inf, not a number in [0, 1]"),
    ('top1 percent', 'results.json', lambda f: _rows(f, test_top1=88.5), "row 2 'test_top1' is 88.5, not a number in [0, 1]"),
    ('params text', 'results.json', lambda f: _rows(f, params='7,840'), "row 2 'params' is '7,840', not a whole number"),
    ('params bool', 'results.json', lambda f: _rows(f, params=True), "row 2 'params' is True, not a whole number >= 0"),
    ('blr null', 'results.json', lambda f: _rows(f, blr=None), "row 2 'blr' is None, not a positive number"),
    ('probe a number', 'results.json', lambda f: _rows(f, probe=3), "row 2 'probe' is 3, not text"),
    ('probe a list', 'results.json', lambda f: _rows(f, probe=['ep']), "row 2 'probe' is ['ep'], not text"),
    ('meta garbage', 'meta.json', lambda f: 'encoder=mae', 'not JSON'),
    ('meta a list', 'meta.json', lambda f: '[]', 'holds a list, not an object'),
    ('meta no seed', 'meta.json', lambda f: _meta(f, drop='seed'), "has no 'seed'"),
    ('seed text', 'meta.json', lambda f: _meta(f, seed='0'), "'seed' is '0', not a whole number >= 0"),
    ('seed negative', 'meta.json', lambda f: _meta(f, seed=-1), "'seed' is -1"),
    ('encoder null', 'meta.json', lambda f: _meta(f, encoder=None), "'encoder' is None, not text"),
    ('weights a dict', 'meta.json', lambda f: _meta(f, weights={'a': 1}), "'weights' is {'a': 1}, not text"),
    ('n_test NaN', 'meta.json', lambda f: _meta(f, n_test=float('nan')), "'n_test' is nan"),
    ('epochs a list', 'meta.json', lambda f: _meta(f, epochs=[1, 2]), "'epochs' is [1, 2]"),
    ('knn a list', 'knn.json', lambda f: '[0.8]', 'holds a list, not an object'),
    ('knn top1 text', 'knn.json', lambda f: '{"cls": {"top1": "high"}}', "'cls' 'top1' is 'high', not a number in [0, 1]"),
    ('knn entry a number', 'knn.json', lambda f: '{"cls": 0.8}', "'cls' is a number, not an object"),
]

@pytest.mark.parametrize('cmd', [ep_leaderboard, ep_compare])
@pytest.mark.parametrize('file, tamper, says', [t[1:] for t in TAMPERED], ids=[t[0] for t in TAMPERED])
def test_tampered_file(cmd, file, tamper, says, runs, tmp_path, monkeypatch, capsys):
    f = runs[1]/file; new = tamper(f)
    f.write_bytes(new if isinstance(new, bytes) else new.encode())
    before = snapshot(tmp_path)
    code, out, err = run_cli(cmd, monkeypatch, capsys, [*runs, '--out', tmp_path/'board'])
    one_line_error(cmd.__name__, code, err, f'{f}: {says}', 'run ep_probe again')
    assert snapshot(tmp_path) == before and not (tmp_path/'board').exists() and out == ''


@pytest.mark.parametrize('value, says', [('not base64!', "a 'test_correct' does not hold 200 test images"),
                                         ('AAAA', "a 'test_correct' does not hold 200 test images"),
                                         (12, "row 2 'test_correct' is 12, not text")])
def test_compare_tampered_per_image_results(value, says, runs, monkeypatch, capsys):
    f = runs[1]/'results.json'; f.write_text(_rows(f, test_correct=value))
    code, out, err = run_cli(ep_compare, monkeypatch, capsys, runs)
    one_line_error('ep_compare', code, err, f'{f}: {says}')
