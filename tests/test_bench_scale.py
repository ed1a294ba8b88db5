"`ep_bench_train --only scale` (issue 39): the stages on ImageNet-like JPEG files, each size in its own process, and the projection."
import json, pandas as pd
from ep_probing.bench_train import ep_bench_train, fake_imagenet
from console import run_cli

def test_scale_through_the_command(tmp_path, monkeypatch, capsys):
    "Two sizes on a tiny ViT: a line per size, the RSS ratio, time per image, the projection; results and sidecars written"
    out = tmp_path/'scale'
    code, o, e = run_cli(ep_bench_train, monkeypatch, capsys, ['--only', 'scale', '--model', 'vit_tiny_patch16_224', '--img_size', 32,
                                                              '--sizes', '4,8', '--probes', 'gap', '--bs', 4, '--out', out])
    assert code == 0, e[-2000:]
    assert '       4 images: decode+transform ' in o and '       8 images: ' in o and 'peak RSS, largest over smallest size: ' in o
    assert 'extraction seconds an image by size: 4: ' in o and "the paper code's log: one MAE-B EP run" in o
    r = pd.read_csv(out/'scale.csv'); p = pd.read_csv(out/'projection.csv')
    assert r.images.tolist() == [4, 8] and (r.peak_rss_mb > 0).all() and r.pid.nunique() == 2          # a process per size
    assert set(p.encoder) == {'ViT-B/16', 'ViT-L/16'} and len(p) == 6 and (p.total_h > 0).all()
    side = json.loads((out/'scale.command.json').read_text())
    assert side['command'].startswith('ep_bench_train --only scale') and side['cpu'] and side['versions']['torch']

def test_bad_sizes_and_a_folder_not_ours(tmp_path, monkeypatch, capsys):
    "--sizes 0 is one line and exit 2; fake_imagenet refuses a folder holding the user's files, and leaves them"
    code, o, e = run_cli(ep_bench_train, monkeypatch, capsys, ['--only', 'scale', '--sizes', '8,0'])
    assert code == 2 and e.strip().count('\n') == 0, e
    assert e.startswith('ep_bench_train: error: --sizes 0: must be an integer of at least 1'), e
    (tmp_path/'mine.txt').write_text('keep')
    try: fake_imagenet(tmp_path, n=4); raise AssertionError('no error')
    except ValueError as err: assert 'is not empty and holds no fake_imagenet.json' in str(err)
    assert (tmp_path/'mine.txt').read_text() == 'keep' and not (tmp_path/'train').exists()
