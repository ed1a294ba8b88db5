"Tests of `ep_probing.data` on the real Debian Fashion-MNIST files and on bad inputs"
import gzip, warnings, numpy as np, pytest, torch
from pathlib import Path
from PIL import Image
from torch.utils.data import Subset
from ep_probing.data import (FashionMNIST, fmnist_files, read_idx, sha256, low_shot, low_shot_indices, targets_of,
                             stratified_split, image_folder, verify_images, load_image, probe_dls, to_channels)

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

def test_missing_files_error(tmp_path):
    with pytest.raises(FileNotFoundError, match='apt-get install -y dataset-fashion-mnist') as e: FashionMNIST('train', path=tmp_path)
    assert 'path=' in str(e.value) and 'download=True' in str(e.value)

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
    # RGB encoder on grey Fashion-MNIST, grey encoder on an RGB folder
    dls = probe_dls(Subset(test, list(range(8))), Subset(test, list(range(8, 12))), 32, (0.5,) * 3, (0.5,) * 3, bs=4, device='cpu')
    xb, yb = dls.one_batch()
    assert xb.shape == (4, 3, 32, 32) and torch.equal(xb[:, 0], xb[:, 1])
    dls = probe_dls(ds, ds, 28, (0.5,), (0.5,), bs=4, device='cpu')
    assert dls.one_batch()[0].shape == (4, 1, 28, 28)
    assert to_channels(torch.rand(3, 5, 5), 1).shape == (1, 5, 5)
