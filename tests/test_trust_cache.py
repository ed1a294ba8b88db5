"""The feature cache, from a hostile user pass (issue 37): an image replaced in place is never served stale tokens, and
every error about the cache folder says to choose another one, in one line, with nothing lost."""
from functools import partial
import os, sys
from pathlib import Path
import numpy as np
from PIL import Image
from ep_probing.cache import FeatureCache, read_shard
from ep_probing.data import image_folder
from ep_probing.cli import ep_probe
sys.path.insert(0, str(Path(__file__).parent))
import console   # noqa: E402


run_cli = partial(console.run_cli, ep_probe)   # `(monkeypatch, capsys, args)` -> `(code, out, err)`


def one_line_error(code, err, *contains):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and 'Traceback' not in err, err
    assert lines[0].startswith('ep_probe: error: ') and all(c in lines[0] for c in contains), lines[0]


def bmp_folder(root:Path, n:int=10):
    "train/ and test/ folders of two classes, `n` seeded grey 28 px BMPs each (a BMP's size does not depend on its pixels)"
    rng = np.random.default_rng(0)
    for split in ('train', 'test'):
        for c in ('a', 'b'):
            (root/split/c).mkdir(parents=True)
            for i in range(n): Image.fromarray(rng.integers(0, 256, (28, 28), dtype=np.uint8), 'L').save(root/split/c/f'{i:02d}.bmp')
    return root


def tokens(cache_dir:Path, which:str)->dict:
    "`{cache folder: patch tokens}` of the caches under `cache_dir` whose name ends with `which` (':train', ':test')"
    out = {}
    for d in sorted(p for p in cache_dir.iterdir() if p.is_dir()):
        fc = FeatureCache(d)
        if fc.meta['info']['dataset']['name'].endswith(which):
            out[d.name] = np.concatenate([np.asarray(read_shard(d/s)['patch']) for s in fc.manifest['shards']])
    return out


def test_image_replaced_in_place_is_reextracted(tmp_path, monkeypatch, capsys):
    "Same size, other pixels and mtime, at an index the old 8-item sample missed: a new key, the tokens of a fresh cache"
    data = bmp_folder(tmp_path/'d')
    args = ['--data', data, '--epochs', '1', '--probes', 'lp', '--blrs', 'none']
    code, *_ = run_cli(monkeypatch, capsys, [*args, '--out', tmp_path/'o1', '--cache_dir', tmp_path/'c'])
    assert code == 0
    before = tokens(tmp_path/'c', ':train')
    n = len(image_folder(data/'train'))                               # the run caches every train image, in file order
    sampled = {int(i) for i in np.linspace(0, n - 1, 8)}              # what the old key read
    missed = next(i for i in range(n) if i not in sampled)
    f = Path(image_folder(data/'train').samples[missed][0]); size, mtime = f.stat().st_size, f.stat().st_mtime_ns
    Image.fromarray(255 - np.asarray(Image.open(f)), 'L').save(f)   # replaced in place: other pixels, same size
    os.utime(f, ns=(mtime + 10**9, mtime + 10**9))
    assert f.stat().st_size == size
    code, *_ = run_cli(monkeypatch, capsys, [*args, '--out', tmp_path/'o2', '--cache_dir', tmp_path/'c'])
    assert code == 0
    after = tokens(tmp_path/'c', ':train')
    new = {k: v for k, v in after.items() if k not in before}
    assert len(new) == 1, 'the replaced image did not change the key: its stale tokens were reused'
    assert all(np.array_equal(before[k], after[k]) for k in before)   # the old cache is left alone
    code, *_ = run_cli(monkeypatch, capsys, [*args, '--out', tmp_path/'o3', '--cache_dir', tmp_path/'fresh'])
    assert code == 0
    (fresh,) = tokens(tmp_path/'fresh', ':train').values()
    (run,) = new.values()
    np.testing.assert_array_equal(run, fresh)
    assert not np.array_equal(run[missed], next(iter(before.values()))[missed])   # the replaced image's tokens changed


# ---- every error about the cache folder says to choose another one

TINY = ['--train_size', '500', '--test_size', '200', '--epochs', '1', '--probes', 'lp', '--blrs', 'none']
ANOTHER = 'choose another --cache_dir (--debug shows the traceback)'


def test_read_only_place_is_not_writable_not_full(tmp_path, monkeypatch, capsys):
    "/proc takes no folder and reports 0 B free: it is named not writable, before the first line is printed"
    code, out, err = run_cli(monkeypatch, capsys, [*TINY, '--out', tmp_path/'o', '--cache_dir', '/proc/ep_probing_cache'])
    one_line_error(code, err, "'/proc/ep_probing_cache/", 'is not writable', "making a folder in '/proc' fails")
    assert err.rstrip().endswith(ANOTHER) and '0 B' not in err + out and 'caching' not in out
    assert not os.path.exists('/proc/ep_probing_cache')


def test_cache_dir_that_is_a_file(tmp_path, monkeypatch, capsys):
    "A file where the cache folder should be: named, and left as it was"
    (f := tmp_path/'notes.txt').write_text('mine')
    code, out, err = run_cli(monkeypatch, capsys, [*TINY, '--out', tmp_path/'o', '--cache_dir', f])
    one_line_error(code, err, f"{str(f)!r} is a file")
    assert err.rstrip().endswith(ANOTHER) and f.read_text() == 'mine'


def test_not_enough_disk_says_choose_another(tmp_path, monkeypatch, capsys):
    from ep_probing import cache
    real = cache.shutil.disk_usage
    monkeypatch.setattr(cache.shutil, 'disk_usage', lambda p: real(p)._replace(free=10_000))
    code, out, err = run_cli(monkeypatch, capsys, [*TINY, '--out', tmp_path/'o', '--cache_dir', tmp_path/'c'])
    one_line_error(code, err, 'not enough free disk', '(--stream)', 'probe fewer --layers')
    assert err.rstrip().endswith(f'or {ANOTHER}') and not (tmp_path/'c').exists()


def test_disk_full_while_writing_says_choose_another(tmp_path, monkeypatch, capsys):
    "The shard is written by a thread: its message still speaks in flags"
    import errno
    from ep_probing import cache
    def full(*a, **kw): raise OSError(errno.ENOSPC, 'No space left on device')
    monkeypatch.setattr(cache.np, 'save', full)
    code, out, err = run_cli(monkeypatch, capsys, [*TINY, '--out', tmp_path/'o', '--cache_dir', tmp_path/'c'])
    one_line_error(code, err, 'the disk filled up while writing', 'it resumes after the shards already written')
    assert err.rstrip().endswith(f'or {ANOTHER}')
    assert not list((tmp_path/'c').glob('*/.tmp-*')) and not list((tmp_path/'c').glob('*/manifest.json'))


def test_disk_full_on_the_small_files_says_choose_another(tmp_path, monkeypatch, capsys):
    import errno
    from ep_probing import shards
    def full(*a, **kw): raise OSError(errno.ENOSPC, 'No space left on device')
    monkeypatch.setattr(shards, 'write_json', full)                 # meta.json, written before the shards
    code, out, err = run_cli(monkeypatch, capsys, [*TINY, '--out', tmp_path/'o', '--cache_dir', tmp_path/'c'])
    one_line_error(code, err, 'the disk filled up while writing')
    assert err.rstrip().endswith(f'or {ANOTHER}')


def test_damage_that_cannot_be_removed(tmp_path, monkeypatch, capsys):
    "A damaged shard the run may not delete: named, with the ways out; the cache is left as it was, manifest included"
    from ep_probing import cache
    args = [*TINY, '--out', tmp_path/'o', '--cache_dir', tmp_path/'c']
    assert run_cli(monkeypatch, capsys, args)[0] == 0
    (shard, *_) = sorted((tmp_path/'c').glob('*/shard_00000'))
    with open(shard/'patch.npy', 'r+b') as f: f.truncate(1000)
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path/'c').rglob('*'))
    def denied(p, *a, **kw): raise PermissionError(13, 'Permission denied', str(p))
    monkeypatch.setattr(cache.shutil, 'rmtree', denied)
    code, out, err = run_cli(monkeypatch, capsys, [*args[:-4], '--out', tmp_path/'o2', '--cache_dir', tmp_path/'c'])
    one_line_error(code, err, f'feature cache shard {shard} is damaged', 'cannot be removed (Permission denied)',
                   'delete it by hand')
    assert err.rstrip().endswith(f'or {ANOTHER}')
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path/'c').rglob('*')) == before


def test_feature_cache_errors_say_choose_another(tmp_path):
    "In Python the way out names the argument"
    import pytest
    (tmp_path/'c').mkdir()
    with pytest.raises(ValueError, match=r"is incomplete .* again to resume it, or choose another cache_dir=$"):
        FeatureCache(tmp_path/'c')


def test_every_layout_is_keyed_by_every_item_without_reading_images(tmp_path):
    "Each dataset `load_data` reads is keyed from its files' sizes and times or its arrays, never by decoding every image"
    import warnings
    from tiny_datasets import make_tiny, make_tiny_hf, tiny_names
    from ep_probing import cache
    from ep_probing.datasets import load_data
    warnings.simplefilter('ignore')                                  # tiny copies warn that they are not the official sizes
    cases = {n: (n, make_tiny(n, tmp_path/n)) for n in tiny_names}
    cases |= {'hf': (f"hf:{make_tiny_hf(tmp_path/'hf')}", None), 'folder': (bmp_folder(tmp_path/'folder', 3), None),
              'fashion_mnist_sample': ('fashion_mnist_sample', None)}
    for name, (data, root) in cases.items():
        tr, te, *_ = load_data(str(data), str(root or tmp_path/name))
        for ds in (tr, te, torch_subset(tr)):
            cache._slow_warned.clear()
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter('always')
                how = cache.dataset_fingerprint(ds)['items']
            assert how in ('file sizes and times', 'arrays', 'arrow files'), (name, how)
            assert not [x for x in w if 'reads every image' in str(x.message)], name


def torch_subset(ds):
    from torch.utils.data import Subset
    return Subset(ds, list(range(len(ds)))[::-2])
