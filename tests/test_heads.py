"""Heads that leave the run (issue 41, points 2 and 3): the paper code's released EP heads load with the same logits,
`ep_predict` labels real Fashion-MNIST test images with a head `ep_probe` trained, Hub-ready folders reload, and every
user mistake is one line `ep_predict: error: ...` with exit 2."""
from functools import partial
import json, os, shutil, sys
import numpy as np, pytest, torch
import huggingface_hub.constants as hfc
from ep_probing.data import fmnist_sample, subset_indices
from ep_probing.heads import load_head, save_head
from ep_probing.trained import ep_predict, run_head, export_head
from ep_probing.cli import ep_probe
from ep_probing.probes import create_probe
from ep_probing.stats import unpack_correct
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import console   # noqa: E402


run_cli = partial(console.run_cli, ep_predict)   # `(monkeypatch, capsys, args)` -> `(code, out, err)`


def one_line_error(code, err, contains):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and 'Traceback' not in err, err
    assert lines[0].startswith('ep_predict: error: ') and contains in lines[0], lines[0]


# --- the paper code's release format, derived from its code (billpsomas/efficient-probing):
# probe_heads.py: model.head = Sequential(EfficientProbing, BatchNorm1d(affine=False, eps=1e-6), Linear); the checkpoint
# holds model_without_ddp.head.state_dict(); tools/export_ep_heads.py saves {'state_dict': sd, 'meta': meta} as
# ep_head.pth and meta as config.json. poolings/ep.py: `cls_token` (1, M, C), `v` Linear(C, C/d_out, no bias).

def release_state(p):
    "Our EP probe's weights under the release's keys"
    sd = p.state_dict()
    return {'0.cls_token': sd['pool.query'][None].clone(), '0.v.weight': sd['pool.v.weight'].clone(),
            '1.running_mean': sd['norm.running_mean'].clone(), '1.running_var': sd['norm.running_var'].clone(),
            '1.num_batches_tracked': sd['norm.num_batches_tracked'].clone(),
            '2.weight': sd['head.weight'].clone(), '2.bias': sd['head.bias'].clone()}


def release_logits(sd, x):
    "`poolings/ep.py` EfficientProbing.forward (num_heads=1), then BatchNorm1d (eval) and Linear, in float64"
    sd = {k: v.double() for k, v in sd.items()}; x = x.double()
    B, N, C = x.shape
    cls_token = sd['0.cls_token'].expand(B, -1, -1); M = cls_token.shape[1]; Cp = sd['0.v.weight'].shape[0]
    q = cls_token.reshape(B, M, 1, C).permute(0, 2, 1, 3) * C ** -0.5
    k = x.reshape(B, N, 1, C).permute(0, 2, 1, 3)
    v = (x @ sd['0.v.weight'].T).reshape(B, N, M, Cp // M).permute(0, 2, 1, 3)
    attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
    x_cls = torch.matmul(attn.squeeze(1).unsqueeze(2), v).reshape(B, Cp)
    x_cls = (x_cls - sd['1.running_mean']) / torch.sqrt(sd['1.running_var'] + 1e-6)
    return x_cls @ sd['2.weight'].T + sd['2.bias']


def write_release(folder, p, variant, **meta):
    folder.mkdir(parents=True, exist_ok=True)
    meta = dict(method='Tiny', arch='T', cls_features=variant, ep_queries=p.config.get('num_queries', 32), d_out=1,
                image_size=28, **meta)
    torch.save({'state_dict': release_state(p), 'meta': meta}, folder/'ep_head.pth')
    (folder/'config.json').write_text(json.dumps(meta, indent=1))
    return folder


@pytest.mark.parametrize('variant, d_out', [('ep', 1), ('ep', 4), ('ep_all', 1)])
def test_release_head_same_logits(variant, d_out, tmp_path):
    torch.manual_seed(0)
    p = create_probe(variant, 64, 7, num_queries=8, d_out=d_out)
    p.train()(torch.randn(32, 10, 64), torch.randn(32, 1, 64)); p.eval()          # non-trivial BatchNorm statistics
    rel = write_release(tmp_path/'linprobe_tiny_ep_q8_d1_imagenet1k', p, variant)
    x, pre = torch.randn(5, 10, 64), torch.randn(5, 1, 64)
    want = release_logits(release_state(p), torch.cat([pre, x], 1) if variant == 'ep_all' else x)
    for where in (rel, rel/'ep_head.pth'):
        h = load_head(where)
        assert h.config == dict(name=variant, dim=64, num_classes=7, num_queries=8, d_out=d_out), h.config
        assert h.meta['method'] == 'Tiny'
        torch.testing.assert_close(h.double()(x.double(), pre.double()), want, rtol=0, atol=1e-10)


def test_release_head_runs_no_code(tmp_path, monkeypatch, capsys):
    marker = tmp_path/'MARKER'
    class Plant:
        def __reduce__(self): return (os.system, (f"touch {marker}",))
    (tmp_path/'r').mkdir()
    torch.save({'state_dict': {}, 'meta': Plant()}, tmp_path/'r'/'ep_head.pth')
    img = fmnist_sample('test')[0][0]; img.save(tmp_path/'a.png')
    code, out, err = run_cli(monkeypatch, capsys, [tmp_path/'r', tmp_path/'a.png'])
    one_line_error(code, err, 'weights_only=True')
    assert not marker.exists() and out == ''


def test_release_head_not_ep(tmp_path, monkeypatch, capsys):
    p = create_probe('ep', 32, 3, num_queries=4)
    rel = write_release(tmp_path/'row', p, 'siglip')
    img = fmnist_sample('test')[0][0]; img.save(tmp_path/'a.png')
    one_line_error(*run_cli(monkeypatch, capsys, [rel, tmp_path/'a.png'])[::2], "only EP heads")


def test_release_head_needs_encoder(tmp_path, monkeypatch, capsys):
    rel = write_release(tmp_path/'row', create_probe('ep', 32, 3, num_queries=4), 'ep')
    img = fmnist_sample('test')[0][0]; img.save(tmp_path/'a.png')
    one_line_error(*run_cli(monkeypatch, capsys, [rel, tmp_path/'a.png'])[::2], 'does not name its encoder; pass --encoder')


def test_save_head_hub_folder(tmp_path):
    p = create_probe('ep', 32, 3, num_queries=4)
    save_head(p, tmp_path/'h', hub=tmp_path/'hub', top1=0.5, classes=['a', 'b', 'c'])
    assert sorted(f.name for f in (tmp_path/'hub').iterdir()) == ['README.md', 'config.json', 'model.safetensors']
    a, b, x = load_head(tmp_path/'h'), load_head(tmp_path/'hub'), torch.randn(2, 9, 32)
    assert a.meta == b.meta and '| validation top-1 | 0.5 |' in (tmp_path/'hub'/'README.md').read_text()
    torch.testing.assert_close(a(x), b(x))


def test_hf_offline_and_cached(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(hfc, 'HF_HUB_CACHE', str(tmp_path/'hf')); monkeypatch.setattr(hfc, 'HF_HUB_OFFLINE', True)
    img = fmnist_sample('test')[0][0]; img.save(tmp_path/'a.png')
    url = 'hf://billpsomas/efficient-probing-heads/linprobe_tiny_ep_q4_d1_imagenet1k'
    code, out, err = run_cli(monkeypatch, capsys, [url, tmp_path/'a.png'])
    one_line_error(code, err, 'offline (HF_HUB_OFFLINE) and not in the local cache')
    # the same head in huggingface_hub's cache layout: found there, offline
    repo = tmp_path/'hf'/'models--billpsomas--efficient-probing-heads'; commit = 'a' * 40
    p = create_probe('ep', 32, 3, num_queries=4)
    write_release(repo/'snapshots'/commit/'linprobe_tiny_ep_q4_d1_imagenet1k', p, 'ep')
    (repo/'refs').mkdir(); (repo/'refs'/'main').write_text(commit)
    h = load_head(url)
    torch.testing.assert_close(h.state_dict()['pool.query'], p.state_dict()['pool.query'])


# --- a run that ep_probe trained, and real Fashion-MNIST test images

@pytest.fixture(scope='module')
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp('run')
    ep_probe(probes='lp,ep', epochs=1, train_size=500, test_size=100, out=str(root/'out'), cache_dir=str(root/'cache'))
    return root/'out'


@pytest.fixture(scope='module')
def test_images(run):
    "The run's 100 test images (the same stratified subset ep_probe drew) as PNG files, and their labels"
    ds = fmnist_sample('test'); idx = subset_indices(ds, 100, 0)
    folder = run.parent/'images'; folder.mkdir()
    labels = []
    for j, i in enumerate(idx):
        img, y = ds[int(i)]; img.save(folder/f'{j:03d}.png'); labels.append(y)
    return folder, np.array(labels), ds.classes


@pytest.mark.parametrize('probe', ['ep', 'lp'])
def test_predict_labels_run_images(probe, run, test_images, monkeypatch, capsys):
    folder, labels, classes = test_images
    code, out, err = run_cli(monkeypatch, capsys, [run, folder, '--probe', probe, '--topk', '3'])
    assert code == 0, err
    lines = out.strip().splitlines()
    assert len(lines) == 100
    top = []
    for j, line in enumerate(lines):
        path, *rest = line.split('\t')
        assert path == str(folder/f'{j:03d}.png') and len(rest) == 6, line
        names, probs = rest[::2], [float(v) for v in rest[1::2]]
        assert set(names) <= set(classes) and probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-3, line
        top.append(classes.index(names[0]))
    row = next(r for r in json.loads((run/'results.json').read_text()) if r['probe'] == probe)
    ran = unpack_correct(row['test_correct'], 100)                     # the run's own per-image verdicts
    mine = np.array(top) == labels
    assert (mine == ran).mean() >= 0.97, (mine == ran).mean()          # fp16 cached tokens may flip a near tie
    assert abs(mine.mean() - row['test_top1']) <= 0.03


def test_predict_default_is_best_on_validation(run, test_images, monkeypatch, capsys):
    rows = json.loads((run/'results.json').read_text()); best = max(rows, key=lambda r: r['top1'])['probe']
    img = test_images[0]/'000.png'
    assert run_cli(monkeypatch, capsys, [run, img])[1] == run_cli(monkeypatch, capsys, [run, img, '--probe', best])[1]


def test_export_head_reloads(run, test_images, tmp_path, monkeypatch, capsys):
    hub = export_head(run, tmp_path/'hub', probe='ep')
    assert sorted(f.name for f in hub.iterdir()) == ['README.md', 'config.json', 'model.safetensors']
    card, row = (hub/'README.md').read_text(), next(r for r in json.loads((run/'results.json').read_text()) if r['probe'] == 'ep')
    assert f"| test top-1 | {row['test_top1']:.4g} |" in card and f"--probes ep:blr={row['blr']}" in card, card
    a, b = run_head(run, 'ep'), load_head(hub)
    x, pre = torch.randn(2, 49, 192), torch.randn(2, 1, 192)
    torch.testing.assert_close(a(x, pre), b(x, pre))
    img = test_images[0]/'001.png'
    assert run_cli(monkeypatch, capsys, [hub, img]) == run_cli(monkeypatch, capsys, [run, img, '--probe', 'ep'])
    (tmp_path/'mine').mkdir(); (tmp_path/'mine'/'notes.txt').write_text('keep')
    with pytest.raises(ValueError, match='holds other files'): export_head(run, tmp_path/'mine')
    assert (tmp_path/'mine'/'notes.txt').read_text() == 'keep' and len(list((tmp_path/'mine').iterdir())) == 1


def test_predict_user_errors(run, test_images, tmp_path, monkeypatch, capsys):
    img = test_images[0]/'000.png'
    (tmp_path/'text.png').write_text('not an image')
    one_line_error(*run_cli(monkeypatch, capsys, [run, tmp_path/'text.png'])[::2], 'is not an image that PIL can read')
    one_line_error(*run_cli(monkeypatch, capsys, [run, img, '--probe', 'mhca'])[::2], '--probe mhca: the run at')
    one_line_error(*run_cli(monkeypatch, capsys, [run, img, '--topk', '0'])[::2], '--topk 0')
    one_line_error(*run_cli(monkeypatch, capsys, [run, tmp_path/'nope.png'])[::2], 'does not exist')
    bare = tmp_path/'bare'; shutil.copytree(run, bare); shutil.rmtree(bare/'heads')
    one_line_error(*run_cli(monkeypatch, capsys, [bare, img])[::2], 'expected results.json, meta.json and heads/')
    empty = tmp_path/'empty'; shutil.copytree(run, empty); [f.unlink() for f in (empty/'heads').iterdir()]
    one_line_error(*run_cli(monkeypatch, capsys, [empty, img])[::2], 'has no saved head of probe')
    assert sorted(f.name for f in (run/'heads').iterdir()) == ['ep.json', 'ep.safetensors', 'lp.json', 'lp.safetensors']
