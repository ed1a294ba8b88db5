"Tests of `ep_probing.datasets`: each registry layout and a Hugging Face dataset, built tiny on disk, read by load_named"
import importlib.util, pickle, sys, warnings, numpy as np, pytest
from pathlib import Path
from PIL import Image
from ep_probing.datasets import load_named, load_split, dataset_registry, data_table
from ep_probing.data import targets_of, low_shot
sys.path.insert(0, str(Path(__file__).parent))
from tiny_datasets import make_tiny, make_tiny_hf, tiny_sizes, tiny_names

def load_tiny(name, root, **kwargs):
    "`load_named` on a tiny copy: it must warn that the sizes are not the official ones"
    with pytest.warns(UserWarning, match=f'{name}: .* not the official .* is this copy complete'):
        return load_named(name, root, **kwargs)

def test_every_name_has_a_tiny_copy():
    assert tiny_names == list(dataset_registry) == list(tiny_sizes)

@pytest.mark.parametrize('name', tiny_names)
def test_tiny_copy_loads(name, tmp_path):
    "Each layout, in its real file formats, loads with its classes and split sizes; images and labels come out right"
    d = load_tiny(name, make_tiny(name, tmp_path))
    assert d.name == name and (len(d.classes), len(d.train), len(d.test)) == tiny_sizes[name]
    assert d.train.classes == d.test.classes == d.classes
    for ds in (d.train, d.test):
        assert targets_of(ds).tolist() == ds.targets.tolist()
        img, y = ds[len(ds) - 1]
        assert isinstance(img, Image.Image) and type(y) is int and y == ds.targets[-1]
        if name != 'cub200' and name != 'imagenet' or ds is d.test:   # the tiny copies colour each class
            assert np.argmax(np.asarray(img.convert('RGB'))[0, 0]) == y
    assert sorted(set(d.train.targets.tolist())) == [0, 1, 2]
    pickle.loads(pickle.dumps(d.train))   # DataLoader workers get the datasets pickled

@pytest.mark.parametrize('name', ['cifar10', 'cub200', 'imagenet'])
def test_channels(name, tmp_path):
    d = load_tiny(name, make_tiny(name, tmp_path), channels=1)
    assert d.train[0][0].mode == 'L' and d.test[0][0].mode == 'L'
    d = load_tiny(name, tmp_path, channels=3)
    assert d.train[0][0].mode == 'RGB'

def test_labels_without_decoding(tmp_path, monkeypatch):
    "targets come without reading an image: low-shot sampling on Food-101 decodes nothing"
    d = load_tiny('food101', make_tiny('food101', tmp_path))
    monkeypatch.setattr(Image, 'open', lambda *a, **k: pytest.fail('an image was decoded'))
    assert len(low_shot(d.train, k=2)) == 6

def test_class_names(tmp_path):
    make_tiny('oxford_pets', tmp_path); make_tiny('fgvc_aircraft', tmp_path); make_tiny('sun397', tmp_path)
    make_tiny('places365', tmp_path); make_tiny('stanford_cars', tmp_path); make_tiny('flowers102', tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        pets = ['Abyssinian', 'American Bulldog', 'American Pit Bull Terrier']
        assert load_named('oxford_pets', tmp_path).classes == pets
        assert load_named('fgvc_aircraft', tmp_path).classes == ['707-320', '727-200', 'Cessna 172']
        assert load_named('sun397', tmp_path).classes == ['abbey', 'bakery/shop', 'canyon']
        assert load_named('places365', tmp_path).classes == ['/a/airfield', '/a/airplane_cabin', '/a/airport_terminal']
        assert load_named('stanford_cars', tmp_path).classes[0] == 'AM General Hummer SUV 2000'
        fl = load_named('flowers102', tmp_path)
    assert fl.classes[:2] == ['pink primrose', 'hard-leaved pocket orchid']
    assert fl.train.targets.tolist() == [0, 1, 2] * 2

def test_sun397_partition_1(tmp_path):
    "Only partition 1's images, in its files' order; the files may sit in SUN397/Partitions/"
    root = make_tiny('sun397', tmp_path)
    (root/'SUN397'/'Partitions').mkdir()
    for f in ('Training_01.txt', 'Testing_01.txt'): (root/'SUN397'/f).rename(root/'SUN397'/'Partitions'/f)
    with pytest.warns(UserWarning): d = load_named('sun397', root)
    assert d.test.targets.tolist() == [0, 1, 2] and len(d.train) == 6
    (root/'SUN397'/'b'/'bakery'/'shop'/'sun_bakery0.jpg').unlink()
    with pytest.raises(FileNotFoundError, match=r'1 images listed in partition 1 are missing, e.g. .*/sun_bakery0.jpg'):
        load_named('sun397', root)

def test_places365_large_images(tmp_path):
    "The high-resolution folders are read when they are there"
    root = make_tiny('places365', tmp_path)
    (root/'data_256_standard').rename(root/'data_large_standard'); (root/'val_256').rename(root/'val_large')
    with pytest.warns(UserWarning): d = load_named('places365', root)
    assert all('/data_large_standard/' in str(f) for f in d.train.ds.files) and all('/val_large/' in str(f) for f in d.test.ds.files)

@pytest.mark.parametrize('name', tiny_names)
def test_missing_data_one_line(name, tmp_path):
    "No data: one line naming the dataset, the folder looked in and the layout expected"
    with pytest.raises(FileNotFoundError) as e: load_named(name, tmp_path)
    msg, info = str(e.value), dataset_registry[name]
    assert len(msg.splitlines()) == 1
    assert msg.startswith(f"{name}: no {info.title} at {tmp_path/info.folder}; expected {info.layout} ({info.fix})")

def test_incomplete_data(tmp_path):
    "A missing batch, a truncated pickle, a missing image, a missing partition: each one line"
    root = make_tiny('cifar10', tmp_path/'a')
    (root/'cifar-10-batches-py'/'data_batch_3').unlink()
    with pytest.raises(FileNotFoundError, match=r'^cifar10: no CIFAR-10 at .*batches-py; expected .*No such file.*_3'):
        load_named('cifar10', root)
    root = make_tiny('cifar100', tmp_path/'b')
    f = root/'cifar-100-python'/'test'; f.write_bytes(f.read_bytes()[:100])
    with pytest.raises(ValueError, match=r'^cifar100: .*cifar-100-python/test is not a readable pickle'):   # named
        load_named('cifar100', root)
    root = make_tiny('food101', tmp_path/'c')
    (root/'food-101'/'images'/'apple_pie'/'0.jpg').unlink()
    with pytest.raises(FileNotFoundError, match=r'^food101: no Food-101 at .*No such file or directory: .*pie/0.jpg'):
        load_named('food101', root)
    root = make_tiny('dtd', tmp_path/'d')
    (root/'dtd'/'dtd'/'labels'/'val1.txt').unlink()
    with pytest.raises(FileNotFoundError, match=r'^dtd: no DTD at .*/dtd/dtd; .*val1.txt'): load_named('dtd', root)
    root = make_tiny('imagenet', tmp_path/'e')
    for f in (root/'val'/'n01440764').iterdir(): f.unlink()
    with pytest.raises(FileNotFoundError, match=r'^imagenet: .*holds no images'): load_named('imagenet', root)
    root = make_tiny('imagenet', tmp_path/'f')   # val as it comes from image-net.org: flat, not in class folders
    for f in list((root/'val').rglob('*.JPEG')): f.rename(root/'val'/f.name)
    for d in (root/'val').glob('n*/'): d.rmdir()
    with pytest.raises(FileNotFoundError, match=r'\(val sorted into its class folders\).*no class folders in .*/f/val'):
        load_named('imagenet', root)

def test_train_test_classes_must_agree(tmp_path):
    root = make_tiny('imagenet', tmp_path)
    (root/'val'/'n09999999').mkdir(); Image.new('RGB', (8, 8)).save(root/'val'/'n09999999'/'x.JPEG')
    with pytest.raises(ValueError, match='train split has 3 classes and the test split 4'): load_named('imagenet', root)

def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match=r"unknown dataset 'imagenet1k'; use one of imagenet, .*, flowers102, or hf:"):
        load_named('imagenet1k', tmp_path)
    with pytest.raises(ValueError, match='cifar10 needs --data_path ROOT'): load_named('cifar10')
    with pytest.raises(ValueError, match='channels=4'): load_named('cifar10', tmp_path, channels=4)
    with pytest.raises(ValueError, match="split='val'"): load_split('cifar10', tmp_path, 'val')

def test_needs_scipy(tmp_path, monkeypatch):
    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, 'find_spec', lambda n, *a: None if n == 'scipy' else find(n, *a))
    with pytest.raises(ImportError, match='flowers102: reading Flowers-102 needs scipy: pip install scipy'):
        load_named('flowers102', tmp_path)

def test_data_table():
    t = data_table()
    assert t.columns.tolist() == ['name', 'classes', 'train size', 'test size', 'test split', 'layout']
    assert t.name.tolist() == tiny_names
    assert t.set_index('name').loc['sun397', 'test split'].startswith('partition 1')

# Hugging Face datasets on disk

@pytest.mark.parametrize('kind', ['save_to_disk', 'parquet'])
def test_hf(kind, tmp_path):
    root = make_tiny_hf(tmp_path/'set', kind)
    d = load_named(f'hf:{root}', channels=3)
    assert (len(d.train), len(d.test), d.classes, d.name) == (7, 4, ['cat', 'dog', 'bird'], 'hf:set')
    img, y = d.test[0]
    assert img.mode == 'RGB' and y == 2 and np.argmax(np.asarray(img)[0, 0]) == 2
    pickle.loads(pickle.dumps(d.train))

def test_hf_validation_folders_and_root(tmp_path):
    "validation stands in for test; parquet files in train/ and validation/ folders; a relative PATH under root"
    make_tiny_hf(tmp_path/'dd', test_split='validation')
    assert len(load_named('hf:dd', root=tmp_path).test) == 4
    src = make_tiny_hf(tmp_path/'pq', 'parquet', test_split='validation')
    for f in src.glob('*.parquet'):
        (src/f.name.split('-')[0]).mkdir(exist_ok=True); f.rename(src/f.name.split('-')[0]/f.name)
    d = load_named(f'hf:{src}')
    assert (len(d.train), len(d.test)) == (7, 4)

def test_hf_plain_parquet(tmp_path):
    "Parquet without Hugging Face's features: image bytes, string labels, columns named by the user"
    import io, pyarrow as pa, pyarrow.parquet as pq
    def png(c):
        b = io.BytesIO(); Image.new('RGB', (6, 6), c).save(b, format='PNG'); return b.getvalue()
    for split, labels in (('train', ['zebra', 'ant', 'zebra']), ('test', ['zebra', 'ant'])):
        t = pa.table({'pic': [{'bytes': png((9, 9, 9)), 'path': None} for _ in labels], 'kind': labels})
        pq.write_table(t, tmp_path/f'{split}-00000-of-00001.parquet')
    with pytest.raises(ValueError, match=r'no image column found among pic, kind; name the columns as hf:PATH:'):
        load_named(f'hf:{tmp_path}')
    d = load_named(f'hf:{tmp_path}:pic:kind')
    assert d.classes == ['ant', 'zebra']   # sorted, the same in both splits (a test label unseen in train is refused)
    assert d.train.targets.tolist() == [1, 0, 1] and d.test.targets.tolist() == [1, 0]
    assert d.train[0][0].size == (6, 6)

def test_hf_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match=r'^hf: no Hugging Face dataset at .*/nothing; expected a DatasetDict'):
        load_named(f'hf:{tmp_path}/nothing')
    (tmp_path/'empty').mkdir()
    with pytest.raises(FileNotFoundError, match=r'no train and test \(or validation\) splits at .*empty \(found: none'):
        load_named(f'hf:{tmp_path}/empty')

def test_hf_needs_datasets(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, 'datasets', None)   # `import datasets` now fails
    with pytest.raises(ImportError, match='pip install datasets'): load_named(f'hf:{tmp_path}')

def test_load_data_is_named(tmp_path):
    "`load_data` returns a `NamedData` for every kind of data: read by name, or unpacked as the 4-tuple it was"
    from ep_probing.datasets import NamedData, load_data
    folder = tmp_path/'folder'
    for split in ('train', 'test'):
        for c in ('a', 'b'):
            (folder/split/c).mkdir(parents=True); Image.new('RGB', (8, 8), (9, 9, 9)).save(folder/split/c/'0.png')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        loaded = [load_data(), load_data('cifar10', make_tiny('cifar10', tmp_path/'c')),
                  load_data(f"hf:{make_tiny_hf(tmp_path/'hf')}"), load_data(str(folder))]
    for d in loaded:
        assert isinstance(d, NamedData), type(d)
        tr, te, classes, name = d
        assert (d.train, d.test, d.classes, d.name) == (tr, te, classes, name) and isinstance(classes, list)
    assert [d.name for d in loaded] == ['fashion_mnist_sample', 'cifar10', 'hf:hf', f'folder:{folder.resolve()}']
