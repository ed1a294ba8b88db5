"`ep_attention` end to end as a subprocess: a tiny timm ViT saved as a local checkpoint, a head saved by `save_head`, and its errors."
import json, os, shutil, subprocess, sys
from pathlib import Path
import numpy as np, torch, timm, pytest
from PIL import Image
from safetensors.torch import save_file
from ep_probing.probes import create_probe
from ep_probing.heads import save_head, load_head
from ep_probing.viz import load_encoder, load_images, image_files, attention_maps, query_diversity

root = Path(__file__).resolve().parents[1]
kw = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=0)

def cli(*args):
    "Run `ep_attention` as a process: the installed console script, or a copy of the wrapper pip writes for it"
    exe = shutil.which('ep_attention')
    if exe: cmd = [exe]
    else:
        wrapper = Path(os.environ.get('PYTEST_TMP', '/tmp'))/'ep_attention_entry.py'
        wrapper.write_text("import sys\nfrom ep_probing.viz import ep_attention\nif __name__ == '__main__': sys.exit(ep_attention())\n")
        cmd = [sys.executable, str(wrapper)]
    env = {**os.environ, 'PYTHONPATH': f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", 'MPLBACKEND': 'Agg'}
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, timeout=300, env=env)

@pytest.fixture
def setup(tmp_path):
    torch.manual_seed(0)
    vit = timm.models.VisionTransformer(**kw)
    save_file(vit.state_dict(), tmp_path/'tiny_vit.safetensors')
    (tmp_path/'tiny_vit.json').write_text(json.dumps(dict(model_kwargs=kw, mean=[0.5] * 3, std=[0.25] * 3)))
    imgs = tmp_path/'imgs'; imgs.mkdir()
    rng = np.random.default_rng(0)
    for i in range(5): Image.fromarray((rng.random((48, 40, 3)) * 255).astype(np.uint8)).save(imgs/f'im{i}.png')
    Image.fromarray((rng.random((20, 20)) * 255).astype(np.uint8)).save(imgs/'grey.jpg')   # grey: converted to RGB
    head = create_probe('ep_all', 32, 4, num_queries=4)
    save_head(head, tmp_path/'head', classes=['a', 'b', 'c', 'd'])
    return tmp_path, vit

def test_ep_attention_end_to_end(setup):
    tmp, vit = setup
    r = cli(tmp/'imgs', tmp/'head', '--encoder', tmp/'tiny_vit.safetensors', '--out', tmp/'out', '--per_page', '4', '--max_queries', '3')
    assert r.returncode == 0, r.stderr
    names = sorted(f.name for f in (tmp/'out').iterdir())
    assert names == ['attention_000.png', 'attention_001.png', 'diversity.json', 'mean_maps.png'], names
    for n in names[:2] + ['mean_maps.png']:
        with Image.open(tmp/'out'/n) as im: assert im.format == 'PNG' and im.size[0] > 100
    div = json.loads((tmp/'out'/'diversity.json').read_text())
    # the numbers are those of the library functions on the same images, encoder and head
    enc, head = load_encoder(str(tmp/'tiny_vit.json')), load_head(tmp/'head')
    x = load_images(image_files(tmp/'imgs'), enc.transform())
    want = query_diversity(attention_maps(head, *enc(x)))
    assert div['images'] == 6 and div['encoder'] == 'tiny_vit'
    for k, v in want.items(): assert abs(div[k] - v) < 1e-5, (k, div[k], v)

def test_ep_attention_single_file(setup):
    tmp, _ = setup
    r = cli(tmp/'imgs'/'im0.png', tmp/'head', '--encoder', tmp/'tiny_vit.json', '--out', tmp/'one')
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp/'one'/'diversity.json').read_text())['images'] == 1

def test_ep_attention_errors(setup):
    tmp, _ = setup
    save_head(create_probe('ep', 64, 4, num_queries=4), tmp/'wide')
    r = cli(tmp/'imgs', tmp/'wide', '--encoder', tmp/'tiny_vit.json', '--out', tmp/'o1')
    assert r.returncode != 0 and 'trained on tokens of width 64' in r.stderr and "gives width 32" in r.stderr, r.stderr
    bad = tmp/'bad'; bad.mkdir(); (bad/'ok.png').write_bytes((tmp/'imgs'/'im0.png').read_bytes()); (bad/'broken.jpg').write_bytes(b'\xff\xd8 truncated')
    r = cli(bad, tmp/'head', '--encoder', tmp/'tiny_vit.json', '--out', tmp/'o2')
    assert r.returncode != 0 and 'broken.jpg' in r.stderr and 'not an image that PIL can read' in r.stderr, r.stderr
    r = cli(tmp/'nowhere', tmp/'head', '--encoder', tmp/'tiny_vit.json', '--out', tmp/'o3')
    assert r.returncode != 0 and 'does not exist' in r.stderr, r.stderr
    save_head(create_probe('gap', 32, 4), tmp/'gap')
    r = cli(tmp/'imgs', tmp/'gap', '--encoder', tmp/'tiny_vit.json', '--out', tmp/'o4')
    assert r.returncode != 0 and 'no attention' in r.stderr, r.stderr
    r = cli(tmp/'imgs', tmp/'nohead', '--encoder', tmp/'tiny_vit.json', '--out', tmp/'o5')
    assert r.returncode != 0 and 'no saved head' in r.stderr, r.stderr
    assert not any((tmp/f'o{i}').exists() for i in range(1, 6))       # nothing written on failure

def test_ep_attention_lite0_short_name(tmp_path):
    "The real ImageNet EfficientNet-Lite0 by short name: 7x7 grid of 1280-d tokens, figures at 224 px"
    import importlib.metadata as md
    photos = Path(md.distribution('foolbox').locate_file('foolbox/data'))
    imgs = tmp_path/'imgs'; imgs.mkdir()
    for f in sorted(photos.glob('imagenet_0[0-2]_*.jpg')): shutil.copy(f, imgs)
    torch.manual_seed(0); save_head(create_probe('ep', 1280, 10, num_queries=8), tmp_path/'head')
    r = cli(imgs, tmp_path/'head', '--encoder', 'efficientnet_lite0_imagenet', '--out', tmp_path/'out')
    assert r.returncode == 0, r.stderr
    with Image.open(tmp_path/'out'/'attention_000.png') as im: assert im.format == 'PNG'
    div = json.loads((tmp_path/'out'/'diversity.json').read_text())
    assert div['images'] == 3 and div['encoder'] == 'efficientnet_lite0_imagenet' and 0 <= div['overlap'] <= 1
