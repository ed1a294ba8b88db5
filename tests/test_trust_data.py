"""Issue 37, the data cases: no dataset file can run code, `hf:` labels are checked, and every bad file or row is one
line `ep_probe: error: ...` (exit 2) naming it, before any extraction. The bad files are built here, on the tiny copies
of tests/tiny_datasets.py; a planted pickle would create MARKER, which must not exist afterwards."""
from functools import partial
import io, math, os, pickle, struct, sys, zlib
from pathlib import Path
import numpy as np, pytest
from PIL import Image
from ep_probing.cli import ep_probe
from ep_probing.datasets import load_named
from ep_probing.data import DataError
import datasets
datasets.disable_progress_bars()   # their bars go to stderr, where the tests look for the one error line

sys.path.insert(0, str(Path(__file__).parent))
from tiny_datasets import make_tiny, make_tiny_hf   # noqa: E402
import console   # noqa: E402

TINY = ['--epochs', '1', '--probes', 'lp', '--blrs', 'none', '--bs', '4', '--valid_pct', '0.3']


run_cli = partial(console.run_cli, ep_probe)   # `(monkeypatch, capsys, args)` -> `(code, out, err)`


def refused(tmp_path, monkeypatch, capsys, data, *contains, root=None):
    "`ep_probe --data data [--data_path root]` fails with one line holding each of `contains`, before any extraction"
    args = ['--data', data, *(['--data_path', root] if root else []), '--out', tmp_path/'o', '--cache_dir', tmp_path/'c']
    capsys.readouterr()                                                    # what building the bad files printed
    code, out, err = run_cli(monkeypatch, capsys, [*args, *TINY])
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and 'Traceback' not in err, err
    assert lines[0].startswith('ep_probe: error: ') and all(c in lines[0] for c in contains), lines[0]
    assert not (tmp_path/'c').exists() and not (tmp_path/'MARKER').exists()   # nothing extracted, nothing ran
    return lines[0]


class Plant:
    "Unpickling this runs `touch MARKER`"
    def __init__(self, marker): self.marker = marker
    def __reduce__(self): return (os.system, (f"touch {self.marker}",))


def bomb(fn:Path, side:int=40_000):
    "Write a PNG that declares `side` x `side` pixels in a few bytes: a decompression bomb"
    def chunk(kind, data): return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
    ihdr = struct.pack('>IIBBBBB', side, side, 8, 0, 0, 0, 0)
    fn.write_bytes(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', ihdr) + chunk(b'IDAT', zlib.compress(b'')) + chunk(b'IEND', b''))


# 1. no code runs from a CIFAR pickle

PLANTS = [('cifar10', 'cifar-10-batches-py/data_batch_1', False), ('cifar10', 'cifar-10-batches-py/test_batch', True),
          ('cifar10', 'cifar-10-batches-py/batches.meta', False), ('cifar100', 'cifar-100-python/meta', False),
          ('cifar100', 'cifar-100-python/train', True)]

@pytest.mark.parametrize('name, file, nested', PLANTS, ids=[f'{n}-{f.split("/")[1]}' for n, f, _ in PLANTS])
def test_cifar_pickle_runs_no_code(name, file, nested, tmp_path, monkeypatch, capsys):
    "A CIFAR file replaced by a pickle whose `__reduce__` runs a command (alone, or inside the batch's dict)"
    root = make_tiny(name, tmp_path/'data')
    plant = Plant(tmp_path/'MARKER')
    (root/file).write_bytes(pickle.dumps({'data': plant, 'labels': [0]} if nested else plant, protocol=2))
    refused(tmp_path, monkeypatch, capsys, name, str(root/file), 'asks to call posix.system', 'it was not run',
            root=root)


@pytest.mark.parametrize('content, contains', [
    (pickle.dumps([[0] * 3072]), 'is not a CIFAR batch'),
    (b'not a pickle', 'is not a readable pickle'),
    (None, "'data' is float64 (2, 3072); expected uint8")], ids=['list', 'garbage', 'float64'])
def test_cifar_batch_of_the_wrong_kind(content, contains, tmp_path, monkeypatch, capsys):
    "A CIFAR batch pickled as a list, garbage, or with float64 data"
    root = make_tiny('cifar10', tmp_path/'data')
    f = root/'cifar-10-batches-py'/'data_batch_2'
    if content is None:
        b = pickle.loads(f.read_bytes()); b['data'] = b['data'].astype(np.float64); content = pickle.dumps(b)
    f.write_bytes(content)
    refused(tmp_path, monkeypatch, capsys, 'cifar10', f'cifar10: {f}', contains, root=root)


# 3. .mat and .json files of the wrong kind

@pytest.mark.parametrize('name, file, content', [
    ('flowers102', 'flowers-102/imagelabels.mat', b''), ('flowers102', 'flowers-102/setid.mat', b'trnid 1 2 3\n'),
    ('stanford_cars', 'stanford_cars/devkit/cars_meta.mat', b''),
    ('stanford_cars', 'stanford_cars/devkit/cars_train_annos.mat', b'MATLAB 5.0, but not really\n')])
def test_bad_mat_file(name, file, content, tmp_path, monkeypatch, capsys):
    "A zero-byte or text `.mat` file"
    root = make_tiny(name, tmp_path/'data')
    (root/file).write_bytes(content)
    refused(tmp_path, monkeypatch, capsys, name, f'{name}: {root/file} is not a readable MATLAB file', root=root)


def test_mat_file_with_text_labels(tmp_path, monkeypatch, capsys):
    "A `.mat` file that reads, but whose labels are text"
    from scipy.io import savemat
    root = make_tiny('flowers102', tmp_path/'data')
    savemat(root/'flowers-102'/'imagelabels.mat', {'labels': np.array(['a', 'b'] * 6)})
    refused(tmp_path, monkeypatch, capsys, 'flowers102', 'imagelabels.mat: labels holds <U1 values, not integers',
            root=root)


@pytest.mark.parametrize('content, contains', [('[["apple_pie/0"]]', 'train.json holds a JSON list; expected a JSON object'),
                                               ('{"apple_pie": 3}', "train.json: class 'apple_pie' has no list"),
                                               ('{"apple_pie": [', 'train.json is not JSON')])
def test_food101_split_file_of_the_wrong_kind(content, contains, tmp_path, monkeypatch, capsys):
    root = make_tiny('food101', tmp_path/'data')
    (root/'food-101'/'meta'/'train.json').write_text(content)
    refused(tmp_path, monkeypatch, capsys, 'food101', str(root/'food-101'/'meta'), contains, root=root)


# 3. decompression bombs in the datasets torchvision lists

BOMBED = ['food101', 'dtd', 'oxford_pets', 'fgvc_aircraft', 'sun397', 'places365', 'stanford_cars', 'flowers102']

@pytest.mark.parametrize('name', BOMBED)
def test_decompression_bomb(name, tmp_path, monkeypatch, capsys):
    "Every image of the copy is a PNG declaring 40,000 x 40,000 pixels: refused in one line naming the file"
    root = make_tiny(name, tmp_path/'data')
    for f in root.rglob('*.jpg'): bomb(f)
    line = refused(tmp_path, monkeypatch, capsys, name, f'{name}: image {root}', 'decompression bombs', root=root)
    assert Path(line.split('image ', 1)[1].split(' has more than')[0]).is_file()


def test_decompression_bomb_beyond_the_first_image(tmp_path):
    "A bomb later in a split is refused when it is read, naming its file (the check decodes only the first image)"
    root = make_tiny('dtd', tmp_path)
    f = root/'dtd'/'dtd'/'images'/'braided'/'braided_0002.jpg'
    bomb(f)
    with pytest.warns(UserWarning): d = load_named('dtd', root)
    i = [Path(p) for p in d.train.ds.files].index(f)
    with pytest.raises(DataError, match=f'image {f} has more than'): d.train[i]


def test_decompression_bomb_met_during_extraction(tmp_path, monkeypatch, capsys):
    "A bomb in the test split, past the first image: the command still ends in one error line naming the file"
    root = make_tiny('dtd', tmp_path/'data')
    f = root/'dtd'/'dtd'/'images'/'braided'/'braided_0005.jpg'   # the last test image
    bomb(f)
    capsys.readouterr()
    args = ['--data', 'dtd', '--data_path', root, '--out', tmp_path/'o', '--cache_dir', tmp_path/'c', *TINY]
    code, out, err = run_cli(monkeypatch, capsys, args)
    errors = [l for l in err.splitlines() if l.startswith('ep_probe: error: ')]
    assert code == 2 and 'Traceback' not in err and len(errors) == 1, err
    assert f'image {f} has more than' in errors[0] and not (tmp_path/'o'/'results.json').exists()


# 2-4. Hugging Face datasets

def png(c:int=0)->bytes:
    b = io.BytesIO(); Image.new('RGB', (12, 10), [(200, 30, 30), (30, 200, 30), (30, 30, 200)][c % 3]).save(b, 'PNG')
    return b.getvalue()


def hf_parquet(root:Path, train:list, test:list, label=None, images=None)->Path:
    "Parquet splits of PNG images and `train`/`test` labels (`label`: their `datasets` feature, else inferred)"
    import datasets as hfd
    root.mkdir(parents=True, exist_ok=True)
    for s, ys in (('train', train), ('test', test)):
        imgs = (images or {}).get(s) or [{'bytes': png(i), 'path': None} for i in range(len(ys))]
        feats = hfd.Features(image=hfd.Image(), label=label) if label is not None else None
        cols = {'image': imgs, 'label': ys}
        ds = hfd.Dataset.from_dict(cols, features=feats) if feats else hfd.Dataset.from_dict(cols).cast_column('image', hfd.Image())
        ds.to_parquet(str(root/f'{s}-00000-of-00001.parquet'))
    return root


def test_hf_unlabelled_test_split(tmp_path, monkeypatch, capsys):
    "The Hub marks an unlabelled test split with -1: refused, naming the split and file, not a class '-1'"
    import datasets as hfd
    root = hf_parquet(tmp_path/'hf', [0, 1, 2, 0], [-1, -1], hfd.ClassLabel(names=['cat', 'dog', 'bird']))
    refused(tmp_path, monkeypatch, capsys, f'hf:{root}', 'the test split is unlabelled',
            f"'label' is -1 at {root/'test-00000-of-00001.parquet'} row 0")


@pytest.mark.parametrize('train, test, contains', [
    ([0, 1, None, 0], [0, 1], "the train split is unlabelled: 'label' is None at"),
    ([0.0, 1.0, 1.0], [1.0, math.nan], "the test split is unlabelled: 'label' is nan at"),
    ([[0], [1], [1]], [[1], [0]], "'label' holds list [0] at"),
    (['b', 'c', 'a'], ['c', 'd'], "the label 'd' at"),
    ([0, 2, 2, 0], [0, 1], 'the label 1 at')])
def test_hf_bad_labels(train, test, contains, tmp_path, monkeypatch, capsys):
    "None, NaN and list labels, and a test label never seen in train"
    root = hf_parquet(tmp_path/'hf', train, test)
    refused(tmp_path, monkeypatch, capsys, f'hf:{root}', contains, '.parquet row ')


def test_hf_string_labels_sorted_the_same_in_every_split(tmp_path):
    "String labels are classes in sorted order, the train split's, the same for the test split"
    root = hf_parquet(tmp_path/'hf', ['zebra', 'ant', 'moth', 'ant'], ['moth', 'zebra'])
    d = load_named(f'hf:{root}')
    assert d.classes == d.train.classes == d.test.classes == ['ant', 'moth', 'zebra']
    assert d.train.targets.tolist() == [2, 0, 1, 0] and d.test.targets.tolist() == [1, 2]
    (tmp_path/'hf2').mkdir(); hf_parquet(tmp_path/'hf2', ['b', 'a'], ['a', 'c'])
    with pytest.raises(DataError, match="the label 'c' at .*test-00000-of-00001.parquet row 1 never occurs in the train"):
        load_named(f'hf:{tmp_path/"hf2"}')


def test_hf_empty_split(tmp_path, monkeypatch, capsys):
    import datasets as hfd
    root = hf_parquet(tmp_path/'hf', [0, 1, 0], [], hfd.Value('int64'))
    refused(tmp_path, monkeypatch, capsys, f'hf:{root}', f'the test split at {root} is empty')


def test_hf_missing_image(tmp_path, monkeypatch, capsys):
    "A row whose image is None: refused before extraction, naming the file and row"
    root = hf_parquet(tmp_path/'hf', [0, 1, 0], [1, 0], images={'train': [{'bytes': png(0), 'path': None}, None,
                                                                           {'bytes': png(0), 'path': None}]})
    refused(tmp_path, monkeypatch, capsys, f'hf:{root}', f"no image at {root/'train-00000-of-00001.parquet'} row 1")


def test_hf_column_that_holds_no_images(tmp_path, monkeypatch, capsys):
    "A text column named as the image column (its strings would otherwise be opened as paths)"
    import pyarrow as pa, pyarrow.parquet as pq
    root = tmp_path/'hf'; root.mkdir()
    for s in ('train', 'test'):
        pq.write_table(pa.table({'caption': ['/etc/passwd', 'x'], 'label': [0, 1]}), root/f'{s}-00000-of-00001.parquet')
    refused(tmp_path, monkeypatch, capsys, f'hf:{root}:caption:label', "the column 'caption' holds", 'not images')


def test_hf_parquet_of_another_schema(tmp_path, monkeypatch, capsys):
    "A second train shard with other columns"
    import pyarrow as pa, pyarrow.parquet as pq
    root = make_tiny_hf(tmp_path/'hf', 'parquet')
    odd = root/'train-00001-of-00001.parquet'
    pq.write_table(pa.table({'text': ['a'], 'y': [0]}), odd)
    refused(tmp_path, monkeypatch, capsys, f'hf:{root}', f'{odd} has columns text: string, y: int64 but',
            'must share one schema')


def test_hf_parquet_that_is_not_parquet(tmp_path, monkeypatch, capsys):
    root = make_tiny_hf(tmp_path/'hf', 'parquet')
    (root/'test-00000-of-00001.parquet').write_bytes(b'PAR1 and then nothing')
    refused(tmp_path, monkeypatch, capsys, f'hf:{root}', f"{root/'test-00000-of-00001.parquet'} is not a readable parquet")


@pytest.mark.parametrize('file, content, contains', [
    ('train/state.json', '{"_data_files": [', 'state.json is not JSON'),
    ('train/state.json', '[1, 2]', 'state.json holds a JSON list'),
    ('test/state.json', '{"_data_files": "x"}', "state.json: '_data_files' is not a list"),
    ('dataset_dict.json', '{"splits": 7}', "dataset_dict.json: 'splits' is not a list"),
    ('train/dataset_info.json', 'garbage', 'dataset_info.json is not JSON')])
def test_hf_garbage_json(file, content, contains, tmp_path, monkeypatch, capsys):
    "A `save_to_disk` folder with a garbage `state.json`, `dataset_dict.json` or `dataset_info.json`"
    root = make_tiny_hf(tmp_path/'hf')
    (root/file).write_text(content)
    refused(tmp_path, monkeypatch, capsys, f'hf:{root}', str(root/file.split('/')[0]), contains)


def test_hf_decompression_bomb_and_corrupt_image(tmp_path, monkeypatch, capsys):
    "A bomb first in a split is refused before extraction; a bomb or a corrupt image later is named by file and row"
    bomb(tmp_path/'bomb.png')
    b = (tmp_path/'bomb.png').read_bytes()
    imgs = [{'bytes': x, 'path': None} for x in (png(0), png(1), b, b'not an image')]
    root = hf_parquet(tmp_path/'hf', [0, 1, 0, 1], [1, 0], images={'train': imgs})
    d = load_named(f'hf:{root}')
    f = root/'train-00000-of-00001.parquet'
    with pytest.raises(DataError, match=f'image {f} row 2 has more than'): d.train[2]
    with pytest.raises(OSError, match=f'cannot read image {f} row 3'): d.train[3]
    root = hf_parquet(tmp_path/'hf2', [0, 1], [1, 0], images={'test': imgs[2:]})
    refused(tmp_path, monkeypatch, capsys, f'hf:{root}', f"image {root/'test-00000-of-00001.parquet'} row 0 has more than")


def test_hf_image_path_is_never_fetched(tmp_path):
    "An image given only as a URL is refused, not downloaded"
    import pyarrow as pa, pyarrow.parquet as pq
    root = tmp_path/'hf'; root.mkdir()
    imgs = [{'bytes': png(0), 'path': None}, {'bytes': None, 'path': 'http://example.com/x.png'}]
    for s in ('train', 'test'): pq.write_table(pa.table({'image': imgs, 'label': [0, 0]}), root/f'{s}-00000-of-00001.parquet')
    d = load_named(f'hf:{root}')
    with pytest.raises(DataError, match=f"no image at {root/'train-00000-of-00001.parquet'} row 1"): d.train[1]
