"""The feature cache's key of every dataset stays the same bytes when the datasets say who they are (issue 38).

`legacy_items_key` is the key code of `ep_probing.cache` before issue 38 (commit b6ba933), frozen here: it read the
datasets' attributes itself. The datasets now say who they are (`cache_key_parts`); an existing cache must still be
found, so the new key must equal the old one, byte for byte, on every dataset `load_data` reads."""
import hashlib, os, sys
from pathlib import Path
import numpy as np, torch
from PIL import Image
from torch.utils.data import ConcatDataset, Subset
from ep_probing import cache
from ep_probing.data import fmnist_sample, FashionMNIST, image_folder
from ep_probing.datasets import HFImages, Labelled, load_data, load_named
sys.path.insert(0, str(Path(__file__).parent))
from tiny_datasets import make_tiny, make_tiny_hf, tiny_names   # noqa: E402


# ---- the key code before issue 38, verbatim but for the names ------------------------------------------------------
def _item_bytes(o)->bytes:
    if isinstance(o, (tuple, list)): return b'|'.join(_item_bytes(t) for t in o)
    if isinstance(o, torch.Tensor): o = o.detach().cpu().numpy()
    if isinstance(o, np.ndarray): return f"{o.dtype}{o.shape}".encode() + np.ascontiguousarray(o).tobytes()
    if hasattr(o, 'tobytes') and hasattr(o, 'mode'): return f"{o.mode}{o.size}".encode() + o.tobytes()
    return repr(o).encode()

def _digest(*parts)->bytes:
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, np.ndarray): h.update(f"{p.dtype}{p.shape}".encode()); p = np.ascontiguousarray(p)
        h.update(p.encode() if isinstance(p, str) else p)
    return h.digest()

_labels_at, _arrays_at = ('targets', 'labels', '_labels'), ('images', 'data')
_paths_at = ('files', '_image_files', '_images', 'samples', 'imgs', '_samples')

def _column(ds, k, idx, lists=True):
    a = getattr(ds, k, None)
    if isinstance(a, torch.Tensor): a = a.detach().cpu().numpy()
    elif lists and isinstance(a, (list, tuple)) and a and isinstance(a[0], (int, np.integer)): a = np.asarray(a)
    if not isinstance(a, np.ndarray) or a.dtype.kind not in 'biuf' or not a.ndim or len(a) != len(ds): return None
    return a if idx is None else a[idx]

def _paths(ds):
    for k in _paths_at:
        ps = getattr(ds, k, None)
        if isinstance(ps, (list, tuple)) and ps and len(ps) == len(ds):
            if isinstance(ps[0][0] if isinstance(ps[0], tuple) else ps[0], (str, os.PathLike)): return ps

def _stat_key(paths)->bytes:
    lines = []
    for e in paths:
        p, rest = (e[0], e[1:]) if isinstance(e, tuple) else (e, ())
        s = os.stat(p)
        lines.append(f"{os.fspath(p)}\0{s.st_size}\0{s.st_mtime_ns}" + (f"\0{rest}\n" if rest else "\n"))
    return _digest(''.join(lines))

def _concat_key(ds, idx):
    ends = np.asarray(ds.cumulative_sizes, np.int64); starts = np.concatenate([[0], ends[:-1]])
    i = np.arange(ends[-1] if len(ends) else 0) if idx is None else np.asarray(idx, np.int64)
    part = np.searchsorted(ends, i, side='right'); row = i - starts[part]
    keys = [legacy_items_key(d, None if idx is None else np.unique(row[part == j]))
            for j, d in enumerate(ds.datasets) if idx is None or (part == j).any()]
    return _digest(part, row, *(k for k, _ in keys)), ', '.join(sorted({h for _, h in keys}))

def _rows(idx): return np.arange(0) if idx is None else np.asarray(idx, np.int64)
def _each(ds, idx): return [_item_bytes(ds[int(i)]) for i in (range(len(ds)) if idx is None else idx)]
def _arrow_files(ds):
    if isinstance(cf := getattr(ds, 'cache_files', None), list) and isinstance(getattr(ds, '_fingerprint', None), str):
        return [c['filename'] for c in cf] or None

def legacy_items_key(ds, idx=None)->tuple:
    "`ep_probing.cache._items_key` as it was before issue 38, on the datasets as they were (no dict identity)"
    # our datasets had no `cache_identity` before issue 38 (now theirs gives a dict): only a user's str or bytes counts
    if callable(f := getattr(ds, 'cache_identity', None)) and not isinstance(v := f(), dict):
        return _digest(v if isinstance(v, bytes) else str(v), _rows(idx)), 'cache_identity'
    if isinstance(ds, Subset):
        i = np.asarray(ds.indices, np.int64) % max(len(ds.dataset), 1)
        return legacy_items_key(ds.dataset, i if idx is None else i[idx])
    if isinstance(ds, ConcatDataset): return _concat_key(ds, idx)
    ys = [y for k in _labels_at if (y := _column(ds, k, idx)) is not None]
    if (a := next((a for k in _arrays_at if (a := _column(ds, k, idx, lists=False)) is not None), None)) is not None:
        return _digest(*ys, a), 'arrays'
    if (ps := _paths(ds)) is not None:
        return _digest(*ys, _stat_key(ps if idx is None else [ps[i] for i in idx])), 'file sizes and times'
    if isinstance(ds, (Labelled, HFImages)):
        k, how = legacy_items_key(ds.ds, idx)
        return _digest(*ys, repr((getattr(ds, 'channels', None), getattr(ds, 'col', None))), k), how
    if fs := _arrow_files(ds): return _digest(ds._fingerprint, _stat_key(fs), _rows(idx)), 'arrow files'
    if isinstance(ds, (list, tuple)): return _digest(*ys, *_each(ds, idx)), 'items in memory'
    return _digest(*ys, *_each(ds, idx)), 'every item read'


# ---- the datasets ---------------------------------------------------------------------------------------------------
def every_dataset(root:Path)->dict:
    "`{name: dataset}`: both splits of every tiny registry copy, Hugging Face copies, an image folder, Fashion-MNIST"
    out = {}
    for n in tiny_names:
        for ch in (None, 3):
            tr, te, *_ = load_named(n, make_tiny(n, root/n), ch)
            out[f'{n}:train:{ch}'], out[f'{n}:test:{ch}'] = tr, te
    for kind in ('save_to_disk', 'parquet'):
        tr, te, *_ = load_data(f'hf:{make_tiny_hf(root/kind, kind)}')
        out[f'hf_{kind}:train'], out[f'hf_{kind}:test'] = tr, te
    f = root/'folder'
    for split, n in (('train', 3), ('test', 2)):
        for c in range(3):
            for j in range(n):
                (f/split/f'c{c}').mkdir(parents=True, exist_ok=True)
                Image.new('RGB', (12, 10), (60 * c, 30, 30 + j)).save(f/split/f'c{c}'/f'{j}.png')
    tr, te, *_ = load_data(str(f))
    out['folder:train'], out['folder:test'] = tr, te
    out['grey_folder'] = image_folder(f/'train', channels=1)
    out['fashion_mnist_sample:train'], out['fashion_mnist_sample:test'] = fmnist_sample('train'), fmnist_sample('test')
    rng = np.random.default_rng(0)
    out['fmnist_arrays'] = FashionMNIST.from_arrays('test', rng.integers(0, 256, (5, 28, 28), dtype=np.uint8),
                                                    np.arange(5) % 3)
    return out


def test_cache_keys_unchanged(tmp_path):
    "Every dataset's key, whole, in rows, through `Subset` and `ConcatDataset`, equals the key before issue 38"
    sets = every_dataset(tmp_path)
    for name, ds in sets.items():
        n = len(ds)
        for idx in (None, np.array([n - 1, 0]), np.arange(0, n, 2)):
            assert cache._items_key(ds, idx) == legacy_items_key(ds, idx), (name, idx)
        sub = Subset(ds, [n - 1, 0, 1])
        assert cache._items_key(sub) == legacy_items_key(sub), name
    both = ConcatDataset([sets['cifar10:train:None'], sets['food101:test:3']])
    assert cache._items_key(both, np.array([0, 12, 3])) == legacy_items_key(both, np.array([0, 12, 3]))
    hows = {cache._items_key(ds)[1] for ds in sets.values()}
    assert hows == {'arrays', 'file sizes and times', 'arrow files'}, hows   # no dataset of ours is read image by image


def test_cache_key_of_shipped_sample():
    "The shipped Fashion-MNIST sample keys as it did on main before issue 38 (these digests were computed there)"
    want = {'train': ('fashion_mnist_sample:train', 'FashionMNIST', 10000, 'arrays', '67672b02bc682568'),
            'test': ('fashion_mnist_sample:test', 'FashionMNIST', 10000, 'arrays', 'd9fe2c6ceec27171')}
    for split, w in want.items():
        fp = cache.dataset_fingerprint(fmnist_sample(split), f'fashion_mnist_sample:{split}')
        assert (fp['name'], fp['type'], fp['len'], fp['items'], fp['content']) == w, fp


def test_datasets_say_who_they_are(tmp_path, monkeypatch):
    "Each dataset of ours gives a dict `cache_identity()`, and the key asks it rather than reading its attributes"
    sets = every_dataset(tmp_path)
    kinds = set()
    for ds in sets.values():
        while ds is not None:
            v = ds.cache_identity()
            assert isinstance(v, dict) and {'images', 'files', 'of'} & set(v), (type(ds), v)
            kinds.add(type(ds).__name__); ds = v.get('of')
            if ds is not None and not callable(getattr(ds, 'cache_identity', None)): break   # torchvision's, HF's
    assert {'FashionMNIST', 'Labelled', 'Files', 'Arrays', 'HFImages', 'Folder'} <= kinds, kinds
    def refuse(self): raise RuntimeError('asked')
    monkeypatch.setattr(FashionMNIST, 'cache_identity', refuse)
    try: cache._items_key(sets['fmnist_arrays']); raise AssertionError('the key did not ask the dataset')
    except RuntimeError as e: assert str(e) == 'asked'


def test_extraction_asks_the_dataset_for_batches(tmp_path, monkeypatch):
    "Extraction batches Fashion-MNIST through `FashionMNIST.batch_transform`, to the same tokens as item by item"
    from ep_probing.encoders import create_encoder
    calls, real = [], FashionMNIST.batch_transform
    monkeypatch.setattr(FashionMNIST, 'batch_transform', lambda self, tf: calls.append(tf) or real(self, tf))
    enc = create_encoder('mae_fmnist', layers=[1])
    ds = Subset(fmnist_sample('test'), list(range(12, 0, -1)))
    fast = cache.extract_features(enc, ds, tmp_path, transform=enc.transform(), batch_size=5, progress=False)
    assert len(calls) == 1 and len(fast) == 12
    slow = cache.extract_features(enc, [ds[i] for i in range(12)], tmp_path, transform=enc.transform(), progress=False)
    assert fast.path != slow.path and len(calls) == 1
    for a, b in zip(fast.get_batch(range(12)), slow.get_batch(range(12))): assert torch.equal(a, b)
