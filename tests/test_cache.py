"Feature cache: key reuse and change, kill-and-resume, disk-space error, fp16 contents against the encoder, damage of any kind (named, then healed), checked once per process, non-finite tokens, logs"
import hashlib, os, re, shutil, signal, subprocess, sys, time, warnings, importlib.metadata as md
from pathlib import Path
import numpy as np, pytest, torch, timm
from PIL import Image
from ep_probing import cache, shards
from ep_probing.cache import extract_features, FeatureCache, is_complete, cache_key, read_shard, damaged_shards
from ep_probing.encoders import create_encoder

ROOT = Path(__file__).resolve().parents[1]

def tiny_vit(**kw):
    torch.manual_seed(0)
    return timm.models.VisionTransformer(**{**dict(img_size=32, patch_size=8, embed_dim=32, depth=3, num_heads=2, num_classes=0, reg_tokens=1), **kw})

class SlowImages:
    "Seeded `(3, 32, 32)` images with labels `i % 5`; `delay` seconds per item, `reads` counts item reads"
    def __init__(self, n=48, delay=0.0): self.n, self.delay, self.reads = n, delay, 0
    def __len__(self): return self.n
    def cache_identity(self): return f"SlowImages(n={self.n})"       # item i depends on i alone: the key reads no item
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
    out = capsys.readouterr().out                                   # not a terminal: one line before, one after
    assert out.startswith('caching 24 images x 2 layers') and out.count('\n') == 2 and '\r' not in out
    assert out.splitlines()[1].startswith('extracted 24 images x 2 layers')
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
    assert cache_key(enc, ds, shard_size=8)[1]['version'] == 4 and fc.path.name == cache_key(enc, ds, shard_size=8)[0]

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
    with pytest.raises(ValueError, match=r"not enough free disk .* needs 1\.\d MB, 9\.8 KB are free; stream the images instead "
                                         r"of caching their tokens \(stream=True\), probe fewer layers= \(each of the 2 takes .*\), "
                                         r"free some space \(the cache is fp16, the smallest cache dtype it has\), "
                                         r"or choose another cache_dir=$"):
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
    with pytest.raises(OSError, match=r"disk filled up while writing .*shard_00001'; free some space and run the same command again "
                                      r"\(it resumes after the shards already written\), or choose another cache_dir=$"):
        extract_features(enc, SlowImages(24), tmp_path, progress=False, **ARGS)
    (d,) = list(tmp_path.iterdir())
    assert not is_complete(d) and not list(d.glob('.tmp-*')) and [p.name for p in d.glob('shard_*')] == ['shard_00000']
    monkeypatch.setattr(cache.np, 'save', real_save)
    fc = extract_features(enc, SlowImages(24), tmp_path, progress=False, **ARGS)
    assert is_complete(d) and len(fc) == 24

# ---- damage of any kind: named by FeatureCache, healed by extract_features; checked once per process

def counting(enc):
    "Count `enc.forward_tokens` calls in `enc.calls`"
    enc.calls, f = 0, enc.forward_tokens
    def forward_tokens(x): enc.calls += 1; return f(x)
    enc.forward_tokens = forward_tokens
    return enc

def extract(root, enc=None, n=24):
    return extract_features(enc or create_encoder(tiny_vit(), layers=[0, 2]), SlowImages(n), root, progress=False, **ARGS)

def fresh(tmp_path, n=24):
    "A clean extraction of `n` items into its own root: the reference"
    return extract(tmp_path/'clean', n=n)

def new_process():
    "What a new process starts from: no shard checked in full yet (this one has checked, or written, the test's shards)"
    shards._verified.clear()

def inodes(d): return {p.relative_to(d): p.stat().st_ino for p in d.glob('shard_*/*')}

def damage_warnings(w): return [str(x.message) for x in w if 'feature cache' in str(x.message)]

def test_truncated_shard_is_reextracted_alone(tmp_path):
    fc = extract(tmp_path)
    sh = fc.path/'shard_00001'
    size = (sh/'prefix.npy').stat().st_size
    assert fc.manifest['files']['shard_00001']['prefix.npy']['bytes'] == size and fc.manifest['finite'] is True
    with open(sh/'prefix.npy', 'r+b') as f: f.truncate(100)
    with pytest.raises(ValueError, match=re.escape(f"feature cache shard {sh} is damaged (prefix.npy is 100 bytes, not the {size:,} written); "
                                                   "run the same ep_probe command (or `extract_features` call) again to re-extract it")):
        FeatureCache(fc.path, layers=2)                             # sizes are compared on every open, even in this process
    kept = {p: i for p, i in inodes(fc.path).items() if p.parts[0] != 'shard_00001'}
    enc = counting(create_encoder(tiny_vit(), layers=[0, 2]))
    with pytest.warns(UserWarning, match=re.escape(f"feature cache shard {sh} is damaged (prefix.npy is 100 bytes")) as w:
        healed = extract(tmp_path, enc)
    assert len(damage_warnings(w)) == 1
    assert enc.calls == 1 + 2                                       # the shapes' probe, then the 2 batches of shard 1 only
    assert {p: i for p, i in inodes(fc.path).items() if p.parts[0] != 'shard_00001'} == kept
    ref = fresh(tmp_path)
    for a, b in zip(arrays(healed), arrays(ref)): np.testing.assert_array_equal(a, b)     # bit-identical
    assert healed.manifest['files'] == ref.manifest['files'] and healed.manifest['finite'] is True
    new_process(); assert damaged_shards(fc.path) == {} and not list(fc.path.glob('.tmp-*'))

def test_missing_file_is_named(tmp_path):
    fc = extract(tmp_path)
    (fc.path/'shard_00002/labels.npy').unlink()
    with pytest.raises(ValueError, match=r"shard_00002 is damaged \(labels.npy is missing\)"): FeatureCache(fc.path)
    with pytest.warns(UserWarning, match='labels.npy is missing'): fc2 = extract(tmp_path)
    assert fc2.labels.tolist() == [i % 5 for i in range(24)]

def flip_bits(d):
    "One bit of a token in shard 1, in place: same size"
    f = d/'shard_00001/patch.npy'; b = bytearray(f.read_bytes()); b[len(b) // 2] ^= 0x01; f.write_bytes(b)

def nan_over(d):
    "NaN over the tokens of shard 1 (1 MB, or up to the file's end), in place: same size"
    f = d/'shard_00001/patch.npy'; n = min(1 << 20, f.stat().st_size - 128)
    with open(f, 'r+b') as h: h.seek(128); h.write(np.full(n // 2, np.nan, np.float16).tobytes())

def bad_header(d):
    "An overwritten `.npy` header in shard 1: same size"
    with open(d/'shard_00001/patch.npy', 'r+b') as h: h.seek(20); h.write(b'garbage')

def write(name, text):
    def f(d): (d/name).write_text(text)
    f.__doc__ = f"{name} := {text!r}"; return f

DAMAGE = {  # name: (do it to the cache directory, the damaged file or shard, what is wrong)
    'flipped bits': (flip_bits, 'shard_00001', 'patch.npy does not match its sha256 checksum (same size, other bytes)'),
    'nan written': (nan_over, 'shard_00001', 'patch.npy does not match its sha256 checksum (same size, other bytes)'),
    'npy header': (bad_header, 'shard_00001', 'patch.npy has an unreadable .npy header'),
    'garbage manifest': (write('manifest.json', '\x00garbage'), 'manifest.json', 'not valid JSON: Expecting value: line 1 column 1 (char 0)'),
    'empty manifest': (write('manifest.json', ''), 'manifest.json', 'not valid JSON: '),
    '[] manifest': (write('manifest.json', '[]'), 'manifest.json', 'a JSON list, not an object'),
    '{} manifest': (write('manifest.json', '{}'), 'manifest.json', 'missing or mistyped keys: key, n, shards, files, finite'),
    'wrong manifest': (write('manifest.json', '{"key": "x", "n": 24, "shards": [], "files": {}, "finite": true}'), 'manifest.json',
                       'it does not match meta.json'),
    'garbage meta': (write('meta.json', '{"key": '), 'meta.json', 'not valid JSON: '),
    '{} meta': (write('meta.json', '{}'), 'meta.json', 'missing or mistyped keys: key, info, n, shapes, layers'),
    'meta shapes': (write('meta.json', '{"key": "k", "info": {"shard_size": 8}, "n": 24, "shapes": {"patch": "?"}, "layers": [0, 2]}'),
                    'meta.json', 'its shard size, shapes or layers are malformed'),
}

@pytest.mark.parametrize('damage', list(DAMAGE))
def test_damage_is_named_then_healed(tmp_path, damage):
    do, where, why = DAMAGE[damage]
    fc = extract(tmp_path); ref = arrays(fc); kept = inodes(fc.path)
    do(fc.path); new_process()
    what = 'shard' if where.startswith('shard_') else 'file'
    with pytest.raises(ValueError, match=re.escape(f"feature cache {what} {fc.path/where} is damaged ({why}") + r".*\); "
                       + re.escape("run the same ep_probe command (or `extract_features` call) again to re-extract it")):
        FeatureCache(fc.path)
    if what == 'shard': assert list(damaged_shards(fc.path)) == ['shard_00001']
    else:
        with pytest.raises(ValueError, match=re.escape(f"{fc.path/where}: {why}")): damaged_shards(fc.path)
    enc = counting(create_encoder(tiny_vit(), layers=[0, 2]))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always'); healed = extract(tmp_path, enc)
    (msg,) = damage_warnings(w)                                     # warned once, on one line, naming the file and what is wrong
    assert msg.startswith(f"feature cache {what} {fc.path/where} is damaged ({why}") and '\n' not in msg, msg
    assert enc.calls == 1 + (2 if what == 'shard' else 0)          # the shapes' probe, then only the damaged shard's 2 batches
    for a, b in zip(arrays(healed), ref): np.testing.assert_array_equal(a, b)            # identical tokens afterwards
    assert {p: i for p, i in inodes(fc.path).items() if p.parts[0] != where} == {p: i for p, i in kept.items() if p.parts[0] != where}
    new_process()
    assert damaged_shards(fc.path) == {} and len(FeatureCache(fc.path)) == 24
    with warnings.catch_warnings():
        warnings.simplefilter('error'); extract(tmp_path)           # healed for good: a rerun neither warns nor extracts

@pytest.mark.parametrize('damage', ['flipped bits', 'npy header', 'files.json'])
def test_damage_found_on_resume(tmp_path, damage):
    "An interrupted extraction (no manifest) checks the shards it keeps in full against their own `files.json`"
    fc = extract(tmp_path)
    if damage == 'files.json': (fc.path/'shard_00001/files.json').write_text('[]')
    else: DAMAGE[damage][0](fc.path)
    (fc.path/'manifest.json').unlink(); shutil.rmtree(fc.path/'shard_00002'); new_process()
    enc = counting(create_encoder(tiny_vit(), layers=[0, 2]))
    with pytest.warns(UserWarning, match=re.escape(f"feature cache shard {fc.path/'shard_00001'} is damaged (")) as w:
        healed = extract(tmp_path, enc)
    assert len(damage_warnings(w)) == 1 and enc.calls == 1 + 2 + 2    # shards 1 (damaged) and 2 (missing)
    for a, b in zip(arrays(healed), arrays(fresh(tmp_path))): np.testing.assert_array_equal(a, b)

def test_checked_once_per_process(tmp_path, monkeypatch):
    scans, real = [], shards._scan
    monkeypatch.setattr(shards, '_scan', lambda p: scans.append(Path(p)) or real(p))
    fc = extract(tmp_path)
    assert scans == []                                              # just written: hashed on the way to disk, not read back
    FeatureCache(fc.path); extract(tmp_path); assert scans == []
    new_process()
    extract(tmp_path)
    assert sorted(scans) == sorted(fc.path.glob('shard_*/*.npy')) and len(scans) == 9   # every file read once
    FeatureCache(fc.path, layers=2); extract(tmp_path); damaged_shards(fc.path)
    assert len(scans) == 9                                          # not again in this process
    f = fc.path/'shard_00001/patch.npy'; flip_bits(fc.path); os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    with pytest.raises(ValueError, match='shard_00001 is damaged'): FeatureCache(fc.path)  # rewritten (new mtime): checked again
    assert len(scans) == 9 + 1

def test_scan_counts_nonfinite_across_blocks(tmp_path):
    "The finite check sees every fp16 value, on both sides of the 16 MB block boundary; labels (int64) are not fp16"
    a = np.zeros((1 << 23) + 7, np.float16)                         # 16 MB + 14 bytes of data after a 128-byte header: two blocks
    i = (1 << 23) - 64                                              # the first value of the second block
    a[[0, i - 1, i, len(a) - 1]] = [np.nan, np.inf, -np.inf, np.nan]; a[5] = 65504
    np.save(f := tmp_path/'a.npy', a)
    assert shards._scan(f) == (hashlib.sha256(f.read_bytes()).hexdigest(), (len(a),), 4)
    np.save(g := tmp_path/'l.npy', np.full(3, -1, np.int64))
    assert shards._scan(g)[1:] == ((3,), 0)

class Scaled:
    "`SlowImages` with item `i` multiplied by `factor`"
    def __init__(self, i, factor, n=24): self.ds, self.i, self.factor = SlowImages(n), i, factor
    def __len__(self): return len(self.ds)
    def __getitem__(self, j):
        x, y = self.ds[j]
        return (x * self.factor if j == self.i else x), y

def test_nonfinite_tokens_stop_the_extraction(tmp_path):
    enc = create_encoder(tiny_vit(), layers=[0, 2])
    with pytest.raises(ValueError, match=re.escape("NaN or inf tokens for dataset items [10] (batch 8..11)")):
        extract_features(enc, Scaled(10, float('nan')), tmp_path, progress=False, **ARGS)
    with pytest.raises(ValueError, match=re.escape("for dataset items [17] (batch 16..19) reach ") + r".*beyond the fp16 range .*norm=True"):
        extract_features(enc, Scaled(17, 1e6), tmp_path, progress=False, **ARGS)
    assert not any(is_complete(d) for d in tmp_path.iterdir())
    m = tiny_vit(); m.blocks[0].mlp.fc2.bias.data[3] = float('inf')  # an encoder that gives inf everywhere
    with pytest.raises(ValueError, match=re.escape("NaN or inf tokens for dataset items [0, 1, 2, 3] (batch 0..3)")):
        extract_features(create_encoder(m, layers=[0, 2]), SlowImages(24), tmp_path, progress=False, **ARGS)

def test_token_overflow_speaks_in_flags_on_the_command_line(tmp_path, capsys):
    "On the command line the overflow names `--norm on` and `--precision none`, never a Python argument"
    from ep_probing.core import user_errors
    enc = create_encoder(tiny_vit(), layers=[0, 2])
    with pytest.raises(SystemExit) as e, user_errors('ep_probe', cli=True):
        extract_features(enc, Scaled(17, 1e6), tmp_path, progress=False, **ARGS)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count('\n') == 1 and err.startswith('ep_probe: error: '), err
    assert 'pass --norm on (the final norm rescales them)' in err and 'norm=True' not in err, err

def test_logs(tmp_path, capsys, monkeypatch):
    extract_features(create_encoder(tiny_vit(), layers=[0, 2]), SlowImages(24), tmp_path/'a', progress=False, **ARGS)
    assert capsys.readouterr().out == ''                            # progress=False: silent
    extract_features(create_encoder(tiny_vit(), layers=2), SlowImages(24), tmp_path/'b', **ARGS)
    out = capsys.readouterr().out
    assert re.fullmatch(r"caching 24 images x 1 layer x \(16\+2\) tokens x 32 channels: [\d.]+ KB fp16 in \S+ \([\d.]+ [KMGT]?B free\)\n"
                        r"extracted 24 images x 1 layer x \(16\+2\) tokens x 32 channels in \d+\.\d s \([\d,]+ img/s\) -> \S+ \([\d.]+ KB fp16\)\n", out), out
    (d,) = (tmp_path/'b').iterdir(); (d/'manifest.json').write_text('[]')
    with pytest.warns(UserWarning, match='rebuilding the cache'):
        extract_features(create_encoder(tiny_vit(), layers=2), SlowImages(24), tmp_path/'b', **ARGS)
    out = capsys.readouterr().out                                   # every shard passed its check: none was extracted
    assert out == f"nothing to extract -> {d} ({out.split('(')[-1]}" and '3/3 shards already done)' in out, out
    monkeypatch.setattr(cache, 'interactive', lambda: True)        # a terminal: the size first, then fastprogress's bar
    extract_features(create_encoder(tiny_vit(), layers=2), SlowImages(24), tmp_path/'c', **ARGS)
    out = capsys.readouterr().out
    assert out.startswith('caching 24 images x 1 layer x (16+2) tokens') and ' free)' in out and 'extracted' not in out
