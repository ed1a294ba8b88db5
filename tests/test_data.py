"Tests of `ep_probing.data` on the real Debian Fashion-MNIST files and on bad inputs"
import gzip, hashlib, json, warnings, numpy as np, pytest, torch
from pathlib import Path
import ep_probing.data as data
from PIL import Image
from torch.utils.data import Subset
from ep_probing.core import file_sha256 as sha256
from ep_probing.data import (FashionMNIST, read_idx, low_shot, low_shot_indices, targets_of,
                             stratified_split, image_folder, load_image, to_channels,
                             fmnist_dirs, fmnist_download, fmnist_sha256, fmnist_sample, fmnist_sample_file, make_fmnist_sample)

from timm.models import VisionTransformer
from ep_probing.encoders import create_encoder

FMNIST = Path('/usr/share/datasets/fashion-mnist')

def test_debian_files_present():
    "The Debian package `dataset-fashion-mnist` is installed (CI installs it)"
    for f in ('train-images-idx3-ubyte.gz', 'train-labels-idx1-ubyte.gz', 't10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz'):
        assert (FMNIST/f).is_file(), f"missing {FMNIST/f}: apt-get install -y dataset-fashion-mnist"

@pytest.fixture(scope='module')
def train(): return FashionMNIST('train')

@pytest.fixture(scope='module')
def test(): return FashionMNIST('test')

def test_fashion_mnist_real(train, test):
    assert (len(train), len(test)) == (60000, 10000)
    assert train.images.shape == (60000, 28, 28) and train.images.dtype == torch.uint8
    assert np.bincount(train.targets.numpy()).tolist() == [6000] * 10
    assert np.bincount(test.targets.numpy()).tolist() == [1000] * 10
    # known statistics of the Fashion-MNIST train pixels
    x = train.images.float() / 255
    assert abs(x.mean().item() - 0.2860) < 1e-3 and abs(x.std().item() - 0.3530) < 1e-3
    img, y = test[0]
    assert img.size == (28, 28) and img.mode == 'L' and test.classes[y] == 'Ankle boot'
    assert len(train.sha256) == 2 and all(len(h) == 64 for h in train.sha256.values())

def test_user_directory_gz_and_raw(tmp_path, test):
    "A user directory with the files, gzipped or not, or in torchvision's `FashionMNIST/raw` layout"
    flat = tmp_path/'flat'; flat.mkdir()
    raw = tmp_path/'tv'/'FashionMNIST'/'raw'; raw.mkdir(parents=True)
    for f in ('t10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz'):
        (flat/f).write_bytes((FMNIST/f).read_bytes())
        (raw/f[:-3]).write_bytes(gzip.decompress((FMNIST/f).read_bytes()))
    for d in (flat, tmp_path/'tv'):
        ds = FashionMNIST('test', path=d)
        assert torch.equal(ds.images, test.images) and torch.equal(ds.targets, test.targets)

@pytest.fixture
def nowhere(tmp_path, monkeypatch):
    "No Debian folder, an empty user cache, and a download address where nothing answers"
    empty = tmp_path/'empty'; empty.mkdir()
    monkeypatch.setattr(data, 'fmnist_debian_dir', empty)
    monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path/'xdg'))
    monkeypatch.setattr(data, 'fmnist_url', 'http://127.0.0.1:9/')  # a closed local port: fails at once
    return tmp_path

def test_missing_files_error(nowhere):
    with pytest.raises(FileNotFoundError) as e: FashionMNIST('train', path=nowhere/'empty')
    msg = str(e.value)
    assert '\n' not in msg and 'the download failed' in msg and str(nowhere/'empty') in msg
    assert 'apt-get install -y dataset-fashion-mnist' in msg and '--data_path' in msg and 'train-images-idx3-ubyte.gz' in msg
    assert not [f for f in nowhere.rglob('*') if f.is_file()], "a failed download left files behind"
    with pytest.raises(FileNotFoundError, match='and download=False; install them with'): FashionMNIST('test', download=False)

def write_idx(fn, a):
    hdr = (0x800 + a.ndim).to_bytes(4, 'big') + b''.join(n.to_bytes(4, 'big') for n in a.shape)
    with gzip.open(fn, 'wb') as f: f.write(hdr + a.astype(np.uint8).tobytes())

def fake_fmnist(d, n):
    "A fake test split of `n` images in `d`"
    d.mkdir(parents=True, exist_ok=True)
    write_idx(d/'t10k-images-idx3-ubyte.gz', np.full((n, 28, 28), n))
    write_idx(d/'t10k-labels-idx1-ubyte.gz', np.arange(n) % 10)
    return d

def test_lookup_order(nowhere, monkeypatch):
    "The user's directory beats the Debian one, which beats the user cache"
    user, debian = fake_fmnist(nowhere/'user', 1), fake_fmnist(nowhere/'debian', 2)
    fake_fmnist(nowhere/'xdg'/'ep_probing'/'fashion-mnist', 3)
    assert fmnist_dirs(user) == [user, nowhere/'empty', nowhere/'xdg'/'ep_probing'/'fashion-mnist']
    assert len(FashionMNIST('test')) == 3  # only the cache has files
    monkeypatch.setattr(data, 'fmnist_debian_dir', debian)
    assert len(FashionMNIST('test', download=False)) == 2
    assert len(FashionMNIST('test', user)) == 1
    with pytest.warns(UserWarning, match='not in .*empty; using those in .*debian'): assert len(FashionMNIST('test', nowhere/'empty')) == 2

def zalando_original(fn):
    "Debian's gzip file with Zalando's original header put back (Debian drops the file name and resets the time stamp)"
    mtime = 1504176606 if fn.name.startswith('train') else 1504176627
    return b'\x1f\x8b\x08\x08' + mtime.to_bytes(4, 'little') + b'\x00\x03' + fn.name[:-3].encode() + b'\x00' + fn.read_bytes()[10:]

def test_checksums_are_zalandos():
    "The SHA-256 constants are those of the files whose MD5s Zalando publishes (torchvision checks the same MD5s)"
    from torchvision.datasets import FashionMNIST as TVFashionMNIST
    md5 = dict(TVFashionMNIST.resources)
    for name, h in fmnist_sha256.items():
        orig = zalando_original(FMNIST/name)
        assert hashlib.md5(orig).hexdigest() == md5[name] and hashlib.sha256(orig).hexdigest() == h

def test_download_checked(nowhere, monkeypatch, test):
    "A download from a stand-in server lands in the cache; a wrong file is rejected and not left there"
    mirror = nowhere/'mirror'; mirror.mkdir()
    for name in ('t10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz'): (mirror/name).write_bytes(zalando_original(FMNIST/name))
    monkeypatch.setattr(data, 'fmnist_url', mirror.as_uri() + '/')
    ds = FashionMNIST('test')  # nowhere on disk: downloaded
    cache = nowhere/'xdg'/'ep_probing'/'fashion-mnist'
    assert ds.files[0].parent == cache and torch.equal(ds.images, test.images) and torch.equal(ds.targets, test.targets)
    assert sorted(f.name for f in cache.iterdir()) == ['t10k-images-idx3-ubyte.gz', 't10k-labels-idx1-ubyte.gz']
    (mirror/'t10k-labels-idx1-ubyte.gz').write_bytes(b'not the labels')
    (cache/'t10k-labels-idx1-ubyte.gz').unlink()
    with pytest.raises(OSError, match='it was deleted'): fmnist_download('test', progress=False)
    assert sorted(f.name for f in cache.iterdir()) == ['t10k-images-idx3-ubyte.gz']
    with pytest.raises(FileNotFoundError, match='the download failed .*SHA-256'): FashionMNIST('test')

def test_corrupt_idx(tmp_path):
    data = gzip.decompress((FMNIST/'t10k-labels-idx1-ubyte.gz').read_bytes())
    (tmp_path/'short').write_bytes(data[:-10])
    with pytest.raises(ValueError, match='truncated or corrupt'): read_idx(tmp_path/'short')
    (tmp_path/'bad').write_bytes(b'\x00\x00\x0d\x01' + data[4:])
    with pytest.raises(ValueError, match='not an IDX file of uint8'): read_idx(tmp_path/'bad')

def test_low_shot(train):
    idx = low_shot_indices(train, k=10, seed=3)
    assert len(idx) == 100 and np.bincount(train.targets.numpy()[idx]).tolist() == [10] * 10
    assert np.array_equal(idx, low_shot_indices(train, k=10, seed=3))
    assert not np.array_equal(idx, low_shot_indices(train, k=10, seed=4))
    sub = low_shot(train, frac=0.01, seed=0)
    assert np.bincount(targets_of(sub)).tolist() == [60] * 10

def test_low_shot_errors(train):
    with pytest.raises(ValueError, match=r"class 0 \('T-shirt/top'\) has only 6000"): low_shot(train, k=6001)
    # a class made small on purpose: keep 3 'Trouser' images and all others
    y = train.targets.numpy()
    keep = np.concatenate([np.flatnonzero(y != 1), np.flatnonzero(y == 1)[:3]])
    with pytest.raises(ValueError, match=r"class 1 \('Trouser'\) has only 3"): low_shot(Subset(train, keep.tolist()), k=4)
    with pytest.raises(ValueError, match='exactly one of k'): low_shot(train)
    with pytest.raises(ValueError, match='frac=1.5'): low_shot(train, frac=1.5)

def test_stratified_split(train):
    tr, va = stratified_split(train, 0.1, seed=0)
    assert (len(tr), len(va)) == (54000, 6000)
    assert np.bincount(train.targets.numpy()[va]).tolist() == [600] * 10
    assert len(np.intersect1d(tr, va)) == 0 and len(np.union1d(tr, va)) == 60000
    assert np.array_equal(va, stratified_split(train, 0.1, seed=0)[1])

@pytest.fixture
def folder(tmp_path):
    for c in ('a', 'b'):
        (tmp_path/c).mkdir()
        Image.new('RGB', (20, 20), (255, 0, 0)).save(tmp_path/c/'rgb.png')
        Image.new('L', (20, 20), 77).save(tmp_path/c/'grey.png')
    good = tmp_path/'b'/'rgb.png'
    (tmp_path/'b'/'truncated.png').write_bytes(good.read_bytes()[:40])  # a real PNG cut short
    (tmp_path/'a'/'text.jpg').write_text('not an image')
    return tmp_path

def test_corrupt_files_skipped_with_paths(folder):
    with pytest.warns(UserWarning) as rec: ds = image_folder(folder, channels=3)
    msg = str(rec[0].message)
    assert str(folder/'b'/'truncated.png') in msg and str(folder/'a'/'text.jpg') in msg and '2 unreadable' in msg
    assert len(ds) == 4 and ds.targets == [0, 0, 1, 1]
    assert all(ds[i][0].mode == 'RGB' for i in range(4))

def test_corrupt_files_raised(folder):
    with pytest.raises(OSError, match='truncated.png'): image_folder(folder, on_error='raise')
    with pytest.raises(OSError, match='cannot read image .*text.jpg'): load_image(folder/'a'/'text.jpg')

def test_grey_rgb_mismatch(folder, test):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        ds = image_folder(folder)
    # RGB encoder on grey Fashion-MNIST, grey encoder on an RGB folder: the encoder's transform converts
    vit = lambda **kw: VisionTransformer(**{**dict(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2,
                                                   num_classes=0), **kw})
    rgb = create_encoder(vit())
    x, m, s = rgb.transform()(test[0][0]), rgb.mean, rgb.std
    assert x.shape == (3, 32, 32) and torch.allclose(x[0] * s[0] + m[0], x[1] * s[1] + m[1], atol=1e-5)
    assert create_encoder(vit(img_size=28, patch_size=7, in_chans=1)).transform()(ds[0][0]).shape == (1, 28, 28)
    assert to_channels(torch.rand(3, 5, 5), 1).shape == (1, 5, 5)

def test_sample(train, test):
    "The shipped sample: 1,000 train images per class, the full test split, uint8, the full set's images at its indices"
    tr, te = fmnist_sample('train'), fmnist_sample('test')
    assert tr.images.shape == (10000, 28, 28) and tr.images.dtype == torch.uint8 and tr.targets.dtype == torch.int64
    assert np.bincount(tr.targets.numpy()).tolist() == [1000] * 10
    idx = tr.source_indices
    assert len(np.unique(idx)) == 10000 and idx.min() >= 0 and idx.max() < 60000
    assert torch.equal(tr.images, train.images[idx]) and torch.equal(tr.targets, train.targets[idx])
    assert torch.equal(te.images, test.images) and torch.equal(te.targets, test.targets)
    img, y = tr[5]
    assert img.mode == 'L' and img.size == (28, 28) and y == int(tr.targets[5]) and tr.classes == train.classes
    with pytest.raises(ValueError, match="use 'train' or 'test'"): fmnist_sample('val')

def test_sample_provenance(train, test):
    prov = json.loads(fmnist_sample_file.with_suffix('.json').read_text())
    assert prov['npz_sha256'] == sha256(fmnist_sample_file) and prov['npz_bytes'] == fmnist_sample_file.stat().st_size
    assert fmnist_sample('test').sha256 == {'fmnist_sample.npz': prov['npz_sha256']}
    assert prov['source_sha256'] == train.sha256 | test.sha256
    assert (prov['seed'], prov['per_class']) == (0, 1000) and 'make_fmnist_sample(' in prov['command']

def test_sample_needs_nothing_outside(nowhere):
    "With no Debian folder, no cache and no network the full set fails but the sample loads"
    with pytest.raises(FileNotFoundError): FashionMNIST('test')
    ds = fmnist_sample('test', transform=lambda im: np.array(im))
    assert len(ds) == 10000 and ds[0][0].shape == (28, 28)

def test_make_sample_tiny(tmp_path, train):
    npz = make_fmnist_sample(tmp_path/'tiny', seed=2, per_class=4)
    prov = json.loads((tmp_path/'tiny.json').read_text())
    assert prov['npz_sha256'] == sha256(npz) and prov['arrays']['train_images'] == '(40, 28, 28) uint8'
    ds = fmnist_sample('train', fn=npz)
    assert np.array_equal(ds.source_indices, low_shot_indices(train, k=4, seed=2))
    assert torch.equal(ds.images, train.images[ds.source_indices])
    assert sha256(make_fmnist_sample(tmp_path/'again', seed=2, per_class=4)) == sha256(npz)  # same arrays, same bytes

def test_make_sample_reproduces_shipped(tmp_path):
    "The builder, run on the real data with the recorded arguments, gives the shipped indices and arrays"
    npz = make_fmnist_sample(tmp_path/'fmnist_sample', seed=0, per_class=1000)
    with np.load(npz) as new, np.load(fmnist_sample_file) as shipped:
        assert sorted(new.files) == sorted(shipped.files)
        for k in shipped.files: assert np.array_equal(new[k], shipped[k]), k
