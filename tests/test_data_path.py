"The data path (issue 39): --workers defaults by the data (none for arrays in memory, else min(8, CPU cores))."
import os, numpy as np, pytest, timm
from torch.utils.data import ConcatDataset, Subset
from ep_probing.config import RunConfig
from ep_probing.data import auto_workers, in_memory, fmnist_sample, stream_dls
from ep_probing.datasets import load_named
from ep_probing.encoders import create_encoder
from ep_probing.prepare import Prepared
from tiny_datasets import make_tiny

def tiny_vit(): return timm.models.VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=0)

def test_workers_default_is_decided_by_the_data(tmp_path):
    "RunConfig().workers is None (auto); arrays in memory get 0 workers, image files min(8, CPU cores)"
    assert RunConfig().workers is None and RunConfig(workers=3).workers == 3
    with pytest.raises(ValueError, match='workers=-1: must be an integer of at least 0'): RunConfig(workers=-1)
    assert in_memory(fmnist_sample('test')) and auto_workers(fmnist_sample('test'), cpus=16) == 0
    cifar = load_named('cifar10', make_tiny('cifar10', tmp_path/'c')).train           # CIFAR: arrays from its pickles
    assert in_memory(cifar) and auto_workers(Subset(cifar, [0, 1]), cpus=16) == 0
    files = load_named('imagenet', make_tiny('imagenet', tmp_path/'i')).train            # JPEG files
    assert not in_memory(files) and [auto_workers(files, cpus=c) for c in (1, 4, 64)] == [1, 4, 8]
    assert auto_workers(ConcatDataset([cifar, files]), cpus=4) == 4                   # any files: workers

def test_prepared_uses_the_rule_unless_told(tmp_path):
    "A run on image files gets the rule's workers; on the embedded sample none, so the default job is unchanged"
    root = make_tiny('imagenet', tmp_path/'i')
    p = Prepared(tiny_vit(), 'imagenet', data_path=str(root), valid_pct=0.34)
    assert p.workers == min(8, os.cpu_count())
    assert Prepared(tiny_vit(), 'imagenet', data_path=str(root), valid_pct=0.34, workers=0).workers == 0
    assert Prepared(tiny_vit(), 'fashion_mnist_sample', train_size=100).workers == 0

def test_stream_loaders_keep_their_workers(tmp_path):
    "Streaming with workers keeps them between epochs (persistent) and pins memory only on CUDA"
    tr = load_named('imagenet', make_tiny('imagenet', tmp_path/'i')).train
    enc = create_encoder(tiny_vit())
    dls, test_dl = stream_dls(enc, tr, tr, np.arange(6), np.arange(6, 9), bs=2, workers=1, device='cpu')
    assert dls.train.fake_l.persistent_workers and not dls.train.fake_l.pin_memory and test_dl.fake_l.num_workers == 1
    dls, _ = stream_dls(enc, tr, tr, np.arange(6), np.arange(6, 9), bs=2, workers=0, device='cpu')
    assert not dls.train.fake_l.persistent_workers and dls.train.fake_l.num_workers == 0

def test_extraction_starts_one_loader_for_all_its_shards(tmp_path, monkeypatch):
    "Extraction over image files makes one DataLoader (workers persistent) for every shard to do, not one a shard"
    import torch, ep_probing.cache as cm
    made = []
    class Counted(cm.DataLoader):
        def __init__(self, *a, **k): super().__init__(*a, **k); made.append(self)
    monkeypatch.setattr(cm, 'DataLoader', Counted)
    tr = load_named('imagenet', make_tiny('imagenet', tmp_path/'i')).train
    enc = create_encoder(tiny_vit(), layers=[0, 1]); tf = enc.transform()
    c = cm.extract_features(enc, tr, tmp_path/'one', tf, batch_size=2, shard_size=3, num_workers=1, progress=False)
    assert len(c.manifest['shards']) == -(-len(tr) // 3) >= 3 and len(made) == 1, len(made)   # 3+ shards, one loader
    assert made[0].num_workers == 1 and made[0].persistent_workers and not made[0].pin_memory    # no pinning on the CPU
    ref = cm.extract_features(enc, tr, tmp_path/'ref', tf, batch_size=len(tr), shard_size=len(tr), progress=False)
    assert all(torch.equal(a, b) for a, b in zip(c.get_batch(np.arange(len(tr))), ref.get_batch(np.arange(len(tr)))))
    spans = cm._spans([(0, 0, 3), (2, 6, 8)], 2)                  # batches never cross a shard's end
    assert spans == [(0, 0, 3, 0, 2), (0, 0, 3, 2, 3), (2, 6, 8, 6, 8)]
    dl = cm._loader(tr, tf, spans, 2, torch.device('cuda'))      # on CUDA: pinned batches (made, not iterated, here)
    assert dl.pin_memory and dl.persistent_workers and [list(b) for b in dl.batch_sampler] == [[0, 1], [2], [6, 7]]

def _photos(root, n=4, size=(80, 60)):
    "An image folder of real JPEG files (smooth colour ramps, as photos are), two classes"
    from PIL import Image
    yy, xx = np.mgrid[:size[1], :size[0]]
    for c in ('a', 'b'):
        (root/c).mkdir(parents=True)
        for j in range(n):
            rgb = np.stack([xx * 3 + j * 20, yy * 4, (xx + yy) * 2 + 40 * (c == 'b')], -1).clip(0, 255).astype(np.uint8)
            Image.fromarray(rgb).save(root/c/f'{c}{j}.jpg', quality=90)
    return root

def test_jpeg_bytes_path_gives_the_pil_tokens_within_tolerance_and_another_cache(tmp_path):
    """Extraction with the workers reading bytes and decode_jpeg on the CPU (the path the GPU takes, device-agnostic)
    gives tokens close to PIL's on real JPEG files, in a cache of its own key; the GPU decoder would key another"""
    import torch
    from ep_probing.cache import extract_features, cache_key
    from ep_probing.data import image_folder, JpegTransform, jpeg_source
    ds = image_folder(_photos(tmp_path/'img'), channels=3)
    torch.manual_seed(0); enc = create_encoder(tiny_vit(), layers=[0, 1]); tf = enc.transform()
    pil = extract_features(enc, ds, tmp_path/'c', tf, batch_size=3, shard_size=4, progress=False)
    jpg = extract_features(enc, ds, tmp_path/'c', tf, batch_size=3, shard_size=4, num_workers=1, progress=False,
                           jpeg_device='cpu')
    assert pil.path != jpg.path and len(jpg) == len(pil) == 8                  # two keys: tokens never mix silently
    (p, _, y), (p2, _, y2) = pil.get_batch(np.arange(8)), jpg.get_batch(np.arange(8))
    assert torch.equal(y, y2) and not torch.equal(p, p2)                        # the pixels differ a little...
    rel = ((p2 - p).norm() / p.norm()).item()
    assert rel < 0.01, rel           # ...and so the tokens: 4e-4 here (a few pixels 1-2 levels of 255 apart), under 1%
    src, jt = jpeg_source(ds, tf, 'cpu')                                        # the decoder's device is in the key
    keys = {cache_key(enc, src, JpegTransform(tf, d, 3), shard_size=4)[0] for d in ('cpu', 'cuda')}
    keys |= {cache_key(enc, ds, tf, shard_size=4)[0]}
    assert len(keys) == 3 and jpg.path.name in keys and pil.path.name in keys

def test_decode_gpu_is_refused_on_the_cpu_in_one_line(tmp_path, monkeypatch, capsys):
    "ep_probe --decode gpu on the CPU: one line, exit 2, before anything is built or written"
    from ep_probing.cli import ep_probe
    from console import run_cli
    out = tmp_path/'out'
    code, _, err = run_cli(ep_probe, monkeypatch, capsys, ['--decode', 'gpu', '--device', 'cpu', '--out', out,
                                                           '--cache_dir', tmp_path/'c', '--epochs', '1'])
    errors = [l for l in err.splitlines() if l.startswith('ep_probe: error:')]     # (a library may warn before it)
    assert code == 2 and len(errors) == 1 and errors[0].startswith('ep_probe: error: --decode gpu needs CUDA;'), err
    assert 'Traceback' not in err and not (tmp_path/'c').exists() and not any(out.glob('*.csv'))
    code, _, err = run_cli(ep_probe, monkeypatch, capsys, ['--decode', 'nvjpeg', '--device', 'cpu', '--out', out])
    assert code == 2 and 'ep_probe: error: --decode nvjpeg: use auto, cpu, gpu' in err, err

VERIFY = r'''
import json, os, sys, warnings
from pathlib import Path
import ep_probing.data as D
from ep_probing.dist import init_distributed
init_distributed('cpu')
seen, load = [], D.load_image
def counted(f, *a, **k): seen.append(str(f)); return load(f, *a, **k)
D.load_image = counted                                     # `_Readable` reads the module's name at call time
warnings.simplefilter('ignore')
rec = dict(good=D.verify_images(sys.argv[2:], workers=0), seen=seen)
(Path(sys.argv[1])/f"rank{os.environ['RANK']}.json").write_text(json.dumps(rec))   # a file each: no mixed lines
'''

def test_ranks_split_the_image_check_and_keep_the_same_files(tmp_path):
    "Under torchrun each rank decodes half the files, and every rank keeps the same readable ones, in order"
    import json, shutil, subprocess
    from pathlib import Path
    from PIL import Image
    files = []
    for i in range(10):
        f = tmp_path/f'{i}.jpg'; files.append(str(f))
        if i in (3, 8): f.write_bytes(b'\xff\xd8\xff\xe0 not really a jpeg')
        else: Image.new('RGB', (16, 12), (20 * i, 0, 0)).save(f)
    (tmp_path/'verify.py').write_text(VERIFY)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parent.parent), OMP_NUM_THREADS='1')
    r = subprocess.run([shutil.which('torchrun'), '--standalone', '--nproc_per_node=2', str(tmp_path/'verify.py'),
                        str(tmp_path), *files], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    outs = [json.loads((tmp_path/f'rank{i}.json').read_text()) for i in range(2)]
    want = [f for i, f in enumerate(files) if i not in (3, 8)]
    assert all(o['good'] == want for o in outs)                                  # the same files on both ranks
    a, b = (set(o['seen']) for o in outs)
    assert len(a) == len(b) == 5 and not a & b and a | b == set(files)           # each decoded its half, once
