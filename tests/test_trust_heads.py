"""Heads and runs against hostile files and careless users (issue 48, items 2, 4, 6, 7, 14, 15, 17, 18, 20, 21, 22):
every head passes one check before it is built, a run folder is read one way, and each mistake is one line
`<command>: error: ...` with exit 2, with the run left as it was and nothing printed on stdout."""
import json, os, resource, shutil, struct, subprocess, sys, time
from pathlib import Path
import pytest, torch
from safetensors.torch import load_file, save_file
from ep_probing.data import fmnist_sample
from ep_probing.trained import ep_predict, ep_eval, export_head, run_head
from ep_probing.leaderboard import ep_compare, ep_leaderboard
from ep_probing.cli import ep_probe
from ep_probing.probes import create_probe
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from console import run_cli   # noqa: E402
from test_heads import write_release   # noqa: E402


def one_line_error(cmd, code, out, err, *contains):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and 'Traceback' not in err, err
    assert lines[0].startswith(f'{cmd}: error: ') and all(c in lines[0] for c in contains), (lines[0], contains)
    assert out == '', out


def snapshot(folder)->dict:
    "Every file under `folder` with its bytes: what a refusal must leave as it was"
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(Path(folder).rglob('*')) if p.is_file()}


IMAGE = []   # the test image, written once with the run


@pytest.fixture(scope='module')
def run(tmp_path_factory):
    "A tiny finished run (lp and ep on mae_fmnist), an image of its data, and an empty feature cache for ep_eval"
    root = tmp_path_factory.mktemp('trust_heads')
    ep_probe(probes='lp,ep', epochs=1, train_size=300, test_size=100, out=str(root/'out'), cache_dir=str(root/'cache'))
    fmnist_sample('test')[0][0].save(root/'a.png'); IMAGE.append(root/'a.png')
    return root/'out'


@pytest.fixture
def copy(run, tmp_path):
    "A copy of the run to damage"
    shutil.copytree(run, tmp_path/'run'); return tmp_path/'run'


def pred(monkeypatch, capsys, run, head, *more):
    "ep_predict `head` on the run's image: (code, out, err)"
    return run_cli(ep_predict, monkeypatch, capsys, [head, IMAGE[0], *more])


def evl(monkeypatch, capsys, run, head, cache, *more):
    "ep_eval `head` with its own cache folder: (code, out, err)"
    return run_cli(ep_eval, monkeypatch, capsys, ['--head', head, '--cache_dir', cache, *more])


def refused(monkeypatch, capsys, run, head, tmp_path, *contains, keep=None):
    "ep_predict and ep_eval both refuse `head` in one line; nothing is extracted, the folder `keep` is unchanged"
    keep = keep or run; before = snapshot(keep)
    one_line_error('ep_predict', *pred(monkeypatch, capsys, run, head), *contains)
    code, out, err = evl(monkeypatch, capsys, run, head, tmp_path/'cache')
    one_line_error('ep_eval', code, out, err, *contains)
    assert snapshot(keep) == before and not (tmp_path/'cache').exists()


def set_tensor(st:Path, key:str, fn):
    sd = load_file(str(st)); sd[key] = fn(sd[key]); save_file(sd, str(st))


def set_json(f:Path, **kw):
    d = json.loads(f.read_text()); d.update(kw); f.write_text(json.dumps(d))


# --- 48.6: the weights are checked before anything is built

@pytest.mark.parametrize('key, fn, says', [
    ('head.weight', lambda t: t.index_fill(0, torch.tensor([0]), float('nan')), 'head.weight holds NaN or infinite'),
    ('pool.query', lambda t: t.index_fill(0, torch.tensor([0]), float('inf')), 'pool.query holds NaN or infinite'),
    ('norm.running_var', lambda t: t * 0, 'norm.running_var holds values <= 0'),
    ('norm.running_var', lambda t: -t, 'norm.running_var holds values <= 0')], ids=['nan', 'inf', 'var0', 'var-'])
def test_nonfinite_weights_refused(key, fn, says, copy, monkeypatch, capsys, tmp_path):
    set_tensor(copy/'heads'/'ep.safetensors', key, fn)
    refused(monkeypatch, capsys, copy, copy/'heads'/'ep', tmp_path, 'is not a head that save_head wrote', says)


def test_dtype_in_header_refused(copy, monkeypatch, capsys, tmp_path):
    "The safetensors header says I32 where the head saved F32 (the same bytes): refused, not read as integers"
    st = copy/'heads'/'ep.safetensors'; raw = st.read_bytes(); n = struct.unpack('<Q', raw[:8])[0]
    head = json.loads(raw[8:8 + n]); head['head.weight']['dtype'] = 'I32'
    new = json.dumps(head, separators=(',', ':')).encode().ljust(n)
    st.write_bytes(raw[:8] + new + raw[8 + n:])
    assert load_file(str(st))['head.weight'].dtype == torch.int32
    refused(monkeypatch, capsys, copy, copy/'heads'/'ep', tmp_path, 'wrong dtype', 'head.weight is torch.int32')


@pytest.mark.parametrize('field, value, says', [
    ('num_classes', 10**12, 'do not fit its config'), ('num_classes', 4_000_000, 'do not fit its config'),
    ('dim', 0, "config's dim is 0, not a whole number"), ('dim', 192.0, "config's dim is 192.0"),
    ('num_classes', '10', "config's num_classes is '10'")])
def test_config_bounds_before_building(field, value, says, copy, monkeypatch, capsys, tmp_path):
    "Impossible or huge configs are refused before a probe is built: in a second, and without taking memory"
    js = copy/'heads'/'ep.json'; d = json.loads(js.read_text()); d['config'][field] = value; js.write_text(json.dumps(d))
    rss, t0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, time.perf_counter()
    one_line_error('ep_predict', *pred(monkeypatch, capsys, copy, copy/'heads'/'ep'), says)
    took, grew = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss
    assert grew < 300_000, f"{grew} kB more memory"                          # 4,000,000 classes took 3.75 GB
    print(f"{field}={value}: refused in {took:.2f} s, peak memory +{grew / 1024:.0f} MB")


def test_class_names_count(copy, monkeypatch, capsys, tmp_path):
    "A head (or its run) that names fewer classes than it predicts: one line, not an IndexError"
    set_json(copy/'heads'/'ep.json', classes=['a', 'b'])
    refused(monkeypatch, capsys, copy, copy/'heads'/'ep', tmp_path, 'it names 2 classes but predicts 10')
    set_json(copy/'meta.json', classes=['a'] * 9)
    one_line_error('ep_predict', *pred(monkeypatch, capsys, copy, copy, '--probe', 'lp'),
                   "its run's meta.json: it names 9 classes but predicts 10")


def test_class_names_escaped(copy, monkeypatch, capsys):
    "Class names with a tab or newline: each printed line keeps its fields (path, then name and probability)"
    names = [f"class\t{i}" if i % 2 else f"line\n{i}" for i in range(10)]
    set_json(copy/'heads'/'ep.json', classes=names); set_json(copy/'meta.json', classes=names)
    code, out, err = pred(monkeypatch, capsys, copy, copy, '--probe', 'ep', '--topk', '10')
    assert code == 0, err
    (line,) = out.splitlines()
    fields = line.split('\t')
    assert len(fields) == 21 and set(fields[1::2]) == {n.replace('\t', '\\t').replace('\n', '\\n') for n in names}


def test_release_non_tensor(tmp_path, monkeypatch, capsys, run):
    "A release ep_head.pth whose state_dict holds a list where a tensor belongs"
    rel = write_release(tmp_path/'rel', create_probe('ep', 192, 10, num_queries=4), 'ep', encoder='mae_fmnist')
    ck = torch.load(rel/'ep_head.pth', weights_only=True); ck['state_dict']['2.bias'] = [0.0] * 10
    torch.save(ck, rel/'ep_head.pth')
    refused(monkeypatch, capsys, run, rel, tmp_path, "'2.bias' holds list, not a tensor", keep=rel)


# --- 48.7: heads resolve inside the run's heads/, and agree with the run

@pytest.mark.parametrize('label', ['../../other/heads/ep', '/abs/heads/ep', '..'])
def test_head_outside_the_run_refused(label, copy, monkeypatch, capsys, tmp_path):
    other = tmp_path/'other'/'heads'; other.mkdir(parents=True)
    for f in (copy/'heads').iterdir(): shutil.copy(f, other)
    rows = json.loads((copy/'results.json').read_text())
    for r in rows: r['head'] = None
    rows[1]['probe'] = label; (copy/'results.json').write_text(json.dumps(rows))
    one_line_error('ep_predict', *pred(monkeypatch, capsys, copy, copy, '--probe', label),
                   f"names its head {label!r}, a path outside the run's heads/ (refused)")


def test_head_of_another_encoder_refused(copy, monkeypatch, capsys, tmp_path):
    "A head whose own record names another encoder than its run's"
    set_json(copy/'heads'/'ep.json', encoder='vit_tiny_patch16_224')
    refused(monkeypatch, capsys, copy, copy/'heads'/'ep', tmp_path, "records encoder 'vit_tiny_patch16_224' but its "
            "run has 'mae_fmnist': it is not this run's head")
    one_line_error('ep_predict', *pred(monkeypatch, capsys, copy, copy, '--probe', 'ep'), "records encoder")


# --- 48.14, 48.20: a malformed run folder is one line naming the file

@pytest.mark.parametrize('file, content, says', [
    ('meta.json', '[]', 'meta.json: holds a list, not an object'),
    ('results.json', '{"probe": "ep"}', 'results.json: holds an object, not a list'),
    ('results.json', '[{"probe": "ep", "top1": "abc"}]', "results.json: row 1 'top1' is 'abc', not a number in [0, 1]"),
    ('meta.json', '{"encoder": "mae", "seed": }', 'meta.json: not JSON (Expecting value: line 1 column 28'),
    ('meta.json', '{"layers": [5.5]}', "meta.json: 'layers' is [5.5], not a list of whole numbers")],
    ids=['meta list', 'results dict', 'top1 text', 'meta not JSON', 'layers float'])
def test_malformed_run(file, content, says, copy, monkeypatch, capsys, tmp_path):
    (copy/file).write_text(content)
    refused(monkeypatch, capsys, copy, copy, tmp_path, f'{copy/file}: ', says, 'run ep_probe again')


# --- 48.15: --device cuda where there is none

def test_predict_device_cuda_on_cpu(run, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    one_line_error('ep_predict', *pred(monkeypatch, capsys, run, run, '--device', 'cuda'),
                   '--device cuda: no CUDA device is visible here; use --device cpu')


# --- 48.21, 48.22: special files and refused files, said in our words

def test_special_files(run, tmp_path, monkeypatch, capsys):
    os.mkfifo(tmp_path/'fifo'); os.symlink(tmp_path/'loop', tmp_path/'loop')
    for head, what in (('/dev/null', 'a character device'), (tmp_path/'fifo', 'a named pipe (FIFO)'),
                       (tmp_path/'loop', 'a symbolic link loop')):
        refused(monkeypatch, capsys, run, head, tmp_path, f'{head} is {what}', keep=tmp_path)
    os.mkfifo(tmp_path/'h.json'); (tmp_path/'h.safetensors').write_bytes(b'')
    one_line_error('ep_predict', *pred(monkeypatch, capsys, run, tmp_path/'h'), 'h.json is a named pipe (FIFO)')


def test_refused_files_in_our_words(run, tmp_path, monkeypatch, capsys):
    marker = tmp_path/'MARKER'
    class Plant:
        def __reduce__(self): return (os.system, (f"touch {marker}",))
    (tmp_path/'p').mkdir(); torch.save({'state_dict': {'x': Plant()}}, tmp_path/'p'/'ep_head.pth')
    code, out, err = pred(monkeypatch, capsys, run, tmp_path/'p')
    one_line_error('ep_predict', code, out, err, 'was refused: it holds Python objects besides tensors and plain '
                   'values, and loading them could run code')
    assert err.rstrip().endswith('pass an ep_head.pth of the release (--debug shows the traceback)') and not marker.exists()
    (tmp_path/'z').mkdir(); good = (tmp_path/'p'/'ep_head.pth').read_bytes()
    (tmp_path/'z'/'ep_head.pth').write_bytes(good[:len(good) // 2])          # a truncated zip: "internal miniz error"
    code, out, err = pred(monkeypatch, capsys, run, tmp_path/'z')
    one_line_error('ep_predict', code, out, err, 'cannot be read with weights_only=True: it is damaged, truncated or '
                   "not a torch file (")
    assert err.rstrip().endswith("pass an ep_head.pth of the paper code's release (--debug shows the traceback)"), err


# --- 48.17: hf:// heads with no network fail at once

def test_hf_no_network_fails_at_once(run, tmp_path):
    env = {**os.environ, 'HF_ENDPOINT': 'http://127.0.0.1:9', 'HF_HUB_CACHE': str(tmp_path/'hf'),
           'HF_HUB_OFFLINE': '0', 'PYTHONPATH': str(Path(__file__).resolve().parents[1])}
    exe = tmp_path/'ep_predict'                        # the wrapper pip writes for the console script, timed
    exe.write_text("import sys, time, atexit\nfrom ep_probing.trained import ep_predict\nt = time.perf_counter()\n"
                   "atexit.register(lambda: print(f'took {time.perf_counter() - t:.1f}'))\n"
                   "if __name__ == '__main__': sys.exit(ep_predict())\n")
    r = subprocess.run([sys.executable, exe, 'hf://owner/repo/folder', str(IMAGE[0])],
                       capture_output=True, text=True, timeout=120, env=env)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert 'cannot be reached (no network?)' in lines[0] and 'http://127.0.0.1:9' in lines[0], lines[0]
    took = float(r.stdout.split()[-1])
    assert took < 10, took                                                    # was 22 lines of retries over 45 s
    print(f"refused in {took:.1f} s")


# --- 48.18: a --random_init run is rebuilt as recorded

def test_random_init_run(tmp_path, monkeypatch, capsys):
    out = tmp_path/'rand'
    ep_probe(encoder='vit_tiny_patch16_224', random_init=True, img_size=32, probes='ep', epochs=1, train_size=200,
             test_size=50, out=str(out), cache_dir=str(tmp_path/'cache'))
    fmnist_sample('test')[0][0].save(tmp_path/'a.png'); capsys.readouterr()
    code, out_, err = run_cli(ep_predict, monkeypatch, capsys, [out, tmp_path/'a.png'])
    assert code == 0 and len(out_.splitlines()) == 1, err
    code, out_, err = run_cli(ep_eval, monkeypatch, capsys, ['--head', out, '--cache_dir', tmp_path/'cache'])
    assert code == 0 and '(from the cache)' in out_, err                    # the run's own tokens: the same encoder
    row = json.loads((out/'results.json').read_text())[0]
    assert f"test top-1  {100 * row['test_top1']:.2f}%" in out_, out_
    for cmd, args in ((ep_predict, [out, tmp_path/'a.png']), (ep_eval, ['--head', out, '--cache_dir', tmp_path/'cache'])):
        code, out_, err = run_cli(cmd, monkeypatch, capsys, [*args, '--checkpoint', tmp_path/'nope.pth'])
        one_line_error(cmd.__name__, code, out_, err, f"checkpoint '{tmp_path/'nope.pth'}' does not exist")
        assert '--random_init' not in err, err                                # a flag these commands do not have


# --- 48.2: an edited model card is kept

def test_export_keeps_edited_card(run, tmp_path):
    hub = export_head(run, tmp_path/'hub', probe='ep')
    (hub/'README.md').write_text('# my own card\n')
    with pytest.warns(UserWarning, match='was edited since it was written: kept'): export_head(run, hub, probe='lp')
    assert (hub/'README.md').read_text() == '# my own card\n'
    lp = run_head(run, 'lp').config
    assert json.loads((hub/'config.json').read_text())['config'] == lp                 # the head is the new one
    export_head(run, hub, probe='lp', overwrite_card=True)
    assert (hub/'README.md').read_text().startswith('---') and f"# {lp['name']} head" in (hub/'README.md').read_text()


# --- 48.4: runs that differ in processes or global batch are said to differ

def test_compare_says_scale_differs(run, tmp_path, monkeypatch, capsys):
    a, b = tmp_path/'a', tmp_path/'b'
    shutil.copytree(run, a); shutil.copytree(run, b)
    set_json(a/'meta.json', world_size=1, global_batch=256); set_json(b/'meta.json', world_size=2, global_batch=512, seed=1)
    code, out, err = run_cli(ep_compare, monkeypatch, capsys, [a, b])
    assert code == 0 and 'ep_compare: warning: the runs differ in processes or global batch' in err, err
    assert f'{a}: 1 process(es), global batch 256' in err and f'{b}: 2 process(es), global batch 512' in err, err
    code, out, err = run_cli(ep_leaderboard, monkeypatch, capsys, [a, b])
    assert code == 0 and 'ep_leaderboard: warning: mae_fmnist on fashion_mnist_sample: the runs differ' in err, err


def test_old_and_new_runs_read(run, tmp_path):
    "meta.json without world_size/global_batch (older runs) and with them: both are read"
    from ep_probing.run_folder import open_run
    shutil.copytree(run, tmp_path/'n'); set_json(tmp_path/'n'/'meta.json', world_size=2, global_batch=512)
    shutil.copytree(run, tmp_path/'o'); m = json.loads((tmp_path/'o'/'meta.json').read_text())
    (tmp_path/'o'/'meta.json').write_text(json.dumps({k: v for k, v in m.items() if k not in ('world_size', 'global_batch')}))
    assert open_run(run).meta['world_size'] == 1                       # this ep_probing records it
    assert open_run(tmp_path/'n').meta['world_size'] == 2 and 'world_size' not in open_run(tmp_path/'o').meta


def test_refused_checkpoint_in_our_words(run, tmp_path, monkeypatch, capsys):
    "An encoder checkpoint that torch.load(weights_only=True) refuses, or a truncated one: said whole, in our words"
    marker = tmp_path/'MARKER'
    class Plant:
        def __reduce__(self): return (os.system, (f"touch {marker}",))
    torch.save({'pos_embed': Plant()}, tmp_path/'plant.pth'); good = (tmp_path/'plant.pth').read_bytes()
    (tmp_path/'cut.pth').write_bytes(good[:len(good) // 2])
    for f, says in (('plant.pth', 'it was refused, because it holds Python objects besides tensors and plain values'),
                    ('cut.pth', 'it is damaged, truncated or not a checkpoint (')):
        code, out, err = evl(monkeypatch, capsys, run, run, tmp_path/'cache', '--encoder', 'vit_tiny_patch16_224',
                             '--checkpoint', tmp_path/f)
        one_line_error('ep_eval', code, out, err, f"checkpoint '{tmp_path/f}' cannot be read as tensors: {says}")
        assert err.rstrip().endswith('saved with torch.save (--debug shows the traceback)'), err
    assert not marker.exists() and not (tmp_path/'cache').exists()


def test_special_files_as_runs(run, tmp_path, monkeypatch, capsys):
    "ep_compare and ep_leaderboard given a device or a FIFO instead of a run: they say what it is"
    os.mkfifo(tmp_path/'fifo')
    for cmd in (ep_compare, ep_leaderboard):
        for path, what in (('/dev/null', 'a character device'), (tmp_path/'fifo', 'a named pipe (FIFO)')):
            code, out, err = run_cli(cmd, monkeypatch, capsys, [run, path])
            one_line_error(cmd.__name__, code, out, err, f'{path} is {what}, not an ep_probe run folder')
