"Feature cache: key reuse and change, kill-and-resume, disk-space error, fp16 contents against the encoder"
import os, re, signal, subprocess, sys, time, importlib.metadata as md
from pathlib import Path
import numpy as np, pytest, torch, timm
from PIL import Image
from ep_probing import cache
from ep_probing.cache import extract_features, FeatureCache, is_complete, cache_key, read_shard
from ep_probing.encoders import create_encoder

ROOT = Path(__file__).resolve().parents[1]

def tiny_vit(**kw):
    torch.manual_seed(0)
    return timm.models.VisionTransformer(**{**dict(img_size=32, patch_size=8, embed_dim=32, depth=3, num_heads=2, num_classes=0, reg_tokens=1), **kw})

class SlowImages:
    "Seeded `(3, 32, 32)` images with labels `i % 5`; `delay` seconds per item, `reads` counts item reads"
    def __init__(self, n=48, delay=0.0): self.n, self.delay, self.reads = n, delay, 0
    def __len__(self): return self.n
    def __getitem__(self, i):
        if not 0 <= i < self.n: raise IndexError(i)
        self.reads += 1; time.sleep(self.delay)
        return torch.randn(3, 32, 32, generator=torch.Generator().manual_seed(i)), i % 5

ARGS = dict(batch_size=4, shard_size=8)

def arrays(fc):
    return [np.concatenate([np.asarray(read_shard(fc.path/s)[k]) for s in fc.manifest['shards']]) for k in ('patch', 'prefix', 'labels')]

def test_key_reuse_and_change(tmp_path, capsys):
    enc, ds = create_encoder(tiny_vit(), layers=[0, 2]), SlowImages(24)
    fc = extract_features(enc, ds, tmp_path, **ARGS)
    assert 'feature cache' in capsys.readouterr().out              # the size is printed before extraction
    reads, mtimes = ds.reads, {p: p.stat().st_mtime_ns for p in fc.path.rglob('*.npy')}
    again = extract_features(create_encoder(tiny_vit(), layers=[0, 2]), ds, tmp_path, **ARGS)
    assert again.path == fc.path and capsys.readouterr().out == ''
    assert ds.reads - reads <= 8                                    # only the fingerprint's samples were read
    assert {p: p.stat().st_mtime_ns for p in fc.path.rglob('*.npy')} == mtimes
    changed = dict(layers=extract_features(create_encoder(tiny_vit(), layers=[0, 1]), ds, tmp_path, progress=False, **ARGS),
                   norm=extract_features(create_encoder(tiny_vit(), layers=[0, 2], norm=True), ds, tmp_path, progress=False, **ARGS),
                   weights=extract_features(create_encoder(_reseeded(), layers=[0, 2]), ds, tmp_path, progress=False, **ARGS),
                   transform=extract_features(enc, ds, tmp_path, transform=_Flip(), progress=False, **ARGS),
                   data=extract_features(enc, SlowImages(23), tmp_path, progress=False, **ARGS))
    paths = {k: v.path for k, v in changed.items()}
    assert len({fc.path, *paths.values()}) == 6, paths
    assert {p: p.stat().st_mtime_ns for p in fc.path.rglob('*.npy')} == mtimes      # the old cache was not touched
    assert not np.array_equal(arrays(changed['weights'])[0], arrays(fc)[0])
    np.testing.assert_array_equal(arrays(changed['layers'])[0][:, 0], arrays(fc)[0][:, 0])   # block 0 is the same in both

class _Flip:
    def __call__(self, x): return x.flip(-1)
    def __repr__(self): return '_Flip()'

def _reseeded():
    torch.manual_seed(1)
    return timm.models.VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=3, num_heads=2, num_classes=0, reg_tokens=1)

def _child(root):
    "Run in a subprocess: a slow extraction that the test kills"
    extract_features(create_encoder(tiny_vit(), layers=[0, 2]), SlowImages(64, delay=0.03), root, progress=False, **ARGS)

def test_kill_and_resume(tmp_path):
    root = tmp_path/'killed'
    env = {**os.environ, 'PYTHONPATH': f"{ROOT}{os.pathsep}{ROOT/'tests'}"}
    proc = subprocess.Popen([sys.executable, '-c', f"import test_cache; test_cache._child({str(root)!r})"], env=env)
    t0 = time.time()
    while time.time() - t0 < 240:
        done = list(root.glob('*/shard_*'))
        if len(done) >= 3 or proc.poll() is not None: break
        time.sleep(0.05)
    assert proc.poll() is None, 'the extraction finished before it could be killed'
    os.kill(proc.pid, signal.SIGKILL); proc.wait()
    (d,) = [p for p in root.iterdir() if p.is_dir()]
    assert not is_complete(d)
    with pytest.raises(ValueError, match='incomplete'): FeatureCache(d)
    kept = {p.name: p.stat().st_ino for p in d.glob('shard_*')}
    assert 3 <= len(kept) < 8
    ds = SlowImages(64)
    fc = extract_features(create_encoder(tiny_vit(), layers=[0, 2]), ds, root, progress=False, **ARGS)
    assert fc.path == d and is_complete(d) and not list(d.glob('.tmp-*'))
    assert {p.name: p.stat().st_ino for p in d.glob('shard_*') if p.name in kept} == kept    # completed shards were kept
    assert ds.reads <= 64 - 8 * len(kept) + 8 + 1                   # only the missing shards were extracted
    ref = extract_features(create_encoder(tiny_vit(), layers=[0, 2]), SlowImages(64), tmp_path/'straight', progress=False, **ARGS)
    for a, b in zip(arrays(fc), arrays(ref)): np.testing.assert_array_equal(a, b)

def test_not_enough_disk(tmp_path, monkeypatch):
    real = cache.shutil.disk_usage
    monkeypatch.setattr(cache.shutil, 'disk_usage', lambda p: real(p)._replace(free=10_000))
    enc = create_encoder(tiny_vit(), layers=[0, 2])
    with pytest.raises(OSError, match=r"not enough free disk .* needs 1\.\d MB, 9\.8 KB are free"):
        extract_features(enc, SlowImages(48), tmp_path, **ARGS)
    assert list(tmp_path.iterdir()) == []                           # nothing was written

def test_fp16_contents_match_the_encoder_on_real_photos(tmp_path):
    "The real ImageNet EfficientNet-Lite0 over the 20 foolbox photos: cached tokens equal the encoder's to fp16 rounding"
    d = Path(md.distribution('foolbox').locate_file('foolbox/data'))
    files = sorted(d.glob('imagenet_*.jpg'))
    class Photos:
        def __len__(self): return len(files)
        def __getitem__(self, i): return Image.open(files[i]), int(re.search(r'_(\d+)\.jpg$', files[i].name).group(1))
    enc = create_encoder('efficientnet_lite0_imagenet', num_classes=0)
    t0 = time.time()
    fc = extract_features(enc, Photos(), tmp_path, transform=enc.transform(), name='foolbox_imagenet', batch_size=8, shard_size=16)
    secs = time.time() - t0
    print(f"lite0 x 20 photos: {fc.nbytes} bytes on disk in {secs:.1f}s")
    assert fc.nbytes >= 20 * 49 * 1280 * 2 and len(fc.manifest['shards']) == 2
    p, q, y = fc.get_batch(range(20))
    assert p.dtype == torch.float32 and read_shard(fc.path/'shard_00000')['patch'].dtype == np.float16
    assert isinstance(read_shard(fc.path/'shard_00000')['patch'], np.memmap)
    x = torch.stack([enc.transform()(Image.open(f)) for f in files])
    ref, _ = enc(x)
    assert p.shape == ref.shape == (20, 49, 1280) and q.shape == (20, 0, 1280)
    torch.testing.assert_close(p, ref, rtol=2e-3, atol=2e-3)        # fp16 has 11 significant bits
    assert (p - ref).abs().max() > 0                                # it really was stored in fp16
    assert y.tolist() == [int(re.search(r'_(\d+)\.jpg$', f.name).group(1)) for f in files]

def test_disk_full_while_writing_then_resume(tmp_path, monkeypatch):
    import errno
    real_save, calls = np.save, []
    def full_disk(f, a, *args, **kw):
        calls.append(1)
        if len(calls) > 3: raise OSError(errno.ENOSPC, 'No space left on device')   # the second shard fails
        return real_save(f, a, *args, **kw)
    monkeypatch.setattr(cache.np, 'save', full_disk)
    enc = create_encoder(tiny_vit(), layers=[0, 2])
    with pytest.raises(OSError, match='disk filled up while writing .*shard_00001.* resumes'):
        extract_features(enc, SlowImages(24), tmp_path, progress=False, **ARGS)
    (d,) = list(tmp_path.iterdir())
    assert not is_complete(d) and not list(d.glob('.tmp-*')) and [p.name for p in d.glob('shard_*')] == ['shard_00000']
    monkeypatch.setattr(cache.np, 'save', real_save)
    fc = extract_features(enc, SlowImages(24), tmp_path, progress=False, **ARGS)
    assert is_complete(d) and len(fc) == 24
