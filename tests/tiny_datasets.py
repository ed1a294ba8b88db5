"""Tiny on-disk copies of every layout `ep_probing.datasets.load_named` reads, in the real file formats.

`make_tiny(name, root)` writes a few small images per class (3 classes) of the registry's dataset `name` under
`root`, laid out as the real download is (the same file names, the same pickles, binaries, JSON, `.mat` and text
files that torchvision's classes read); `make_tiny_hf(root, kind)` writes a Hugging Face dataset. `tiny_sizes`
holds what each copy must load as: (classes, train images, test images). Pass `root` to `--data_path`.
"""
import json, pickle, numpy as np
from pathlib import Path
from PIL import Image

__all__ = ['make_tiny', 'make_tiny_hf', 'tiny_sizes', 'tiny_names']

_colours = [(200, 30, 30), (30, 200, 30), (30, 30, 200)]

def _img(fn, c:int, grey:bool=False, size=(12, 10)):
    "Write a small image of class `c` (its own colour; `grey`: mode 'L') to `fn`, the format from its suffix"
    fn = Path(fn); fn.parent.mkdir(parents=True, exist_ok=True)
    Image.new('L' if grey else 'RGB', size, 60*(c+1) if grey else _colours[c % 3]).save(fn)
    return fn

def _text(fn, lines):
    "Write `lines` to `fn`, one a line"
    fn = Path(fn); fn.parent.mkdir(parents=True, exist_ok=True)
    fn.write_text(''.join(f'{l}\n' for l in lines))

def _pixels(labels, hw=32):
    "`(N, 3, hw, hw)` uint8 images, each filled with its class colour"
    return np.stack([np.broadcast_to(np.array(_colours[y], np.uint8)[:, None, None], (3, hw, hw)) for y in labels])

def _pickle(fn, **obj): Path(fn).write_bytes(pickle.dumps(obj, protocol=2))

def _cifar10(root):
    d = root/'cifar-10-batches-py'; d.mkdir(parents=True, exist_ok=True)
    batches = {f'data_batch_{i}': [(i+j) % 3 for j in range(2)] for i in range(1, 6)} | {'test_batch': [0, 1, 2, 0]}
    for fn, ys in batches.items():   # the real keys: batch_label, labels, data (N, 3072) row-major planes, filenames
        _pickle(d/fn, batch_label=fn, labels=ys, data=_pixels(ys).reshape(len(ys), -1),
                filenames=[f'{fn}_{j}.png' for j in range(len(ys))])
    _pickle(d/'batches.meta', label_names=['airplane', 'automobile', 'bird'], num_cases_per_batch=2, num_vis=3072)

def _cifar100(root):
    d = root/'cifar-100-python'; d.mkdir(parents=True, exist_ok=True)
    for fn, ys in {'train': [0, 1, 2, 0, 1, 2, 0], 'test': [2, 1, 0]}.items():
        _pickle(d/fn, filenames=[f'{fn}_{j}.png' for j in range(len(ys))], batch_label=fn, fine_labels=ys,
                coarse_labels=[0]*len(ys), data=_pixels(ys).reshape(len(ys), -1))
    _pickle(d/'meta', fine_label_names=['apple', 'aquarium_fish', 'baby'], coarse_label_names=['fruit_and_vegetables'])

def _stl10(root):
    d = root/'stl10_binary'; d.mkdir(parents=True, exist_ok=True)
    for split, ys in {'train': [0, 1, 2, 0, 1, 2], 'test': [0, 1, 2]}.items():
        (d/f'{split}_X.bin').write_bytes(_pixels(ys, 96).transpose(0, 1, 3, 2).tobytes())   # column-major, as real
        (d/f'{split}_y.bin').write_bytes((np.array(ys, np.uint8) + 1).tobytes())             # labels 1-10
    _text(d/'class_names.txt', ['airplane', 'bird', 'car'])   # no unlabeled_X.bin: it is not needed

def _food101(root):
    d, classes = root/'food-101', ['apple_pie', 'baby_back_ribs', 'baklava']
    for split, n in (('train', 3), ('test', 2)):
        off = 50 if split == 'test' else 0
        meta = {c: [f'{c}/{100*i + j + off}' for j in range(n)] for i, c in enumerate(classes)}
        for i, c in enumerate(classes):
            for f in meta[c]: _img(d/'images'/f'{f}.jpg', i)
        (d/'meta').mkdir(parents=True, exist_ok=True)
        (d/'meta'/f'{split}.json').write_text(json.dumps(meta))
    _text(d/'meta'/'classes.txt', classes)

def _sun397(root):
    d, classes = root/'SUN397', ['/a/abbey', '/b/bakery/shop', '/c/canyon']
    _text(d/'ClassName.txt', classes)
    train, test = [], []
    for i, c in enumerate(classes):
        files = [f'{c}/sun_{c.split("/")[2]}{j}.jpg' for j in range(4)]   # 2 train, 1 test, 1 in neither
        for f in files: _img(d/f.lstrip('/'), i)
        train += files[:2]; test += files[2:3]
    _text(d/'Training_01.txt', train); _text(d/'Testing_01.txt', test)

def _oxford_pets(root):
    d, breeds = root/'oxford-iiit-pet', [('Abyssinian', 1), ('american_bulldog', 2), ('american_pit_bull_terrier', 2)]
    for split, ids in (('trainval', range(1, 4)), ('test', range(10, 12))):
        lines = []
        for i, (b, species) in enumerate(breeds):
            for j in ids:
                _img(d/'images'/f'{b}_{j}.jpg', i); lines.append(f'{b}_{j} {i+1} {species} {j}')
        _text(d/'annotations'/f'{split}.txt', lines)

def _fgvc_aircraft(root):
    d, variants = root/'fgvc-aircraft-2013b'/'data', ['707-320', '727-200', 'Cessna 172']
    _text(d/'variants.txt', variants)
    for split, n, start in (('trainval', 3, 1000000), ('test', 2, 2000000)):
        lines = [f'{start + 10*i + j} {v}' for i, v in enumerate(variants) for j in range(n)]
        for l in lines: _img(d/'images'/f'{l.split()[0]}.jpg', variants.index(l.split(' ', 1)[1]))
        _text(d/f'images_variant_{split}.txt', lines)

def _dtd(root):
    d, classes = root/'dtd'/'dtd', ['banded', 'blotchy', 'braided']
    for split, js in (('train', (1, 2)), ('val', (3,)), ('test', (4, 5))):
        files = [f'{c}/{c}_{j:04d}.jpg' for c in classes for j in js]
        for f in files: _img(d/'images'/f, classes.index(f.split('/')[0]))
        _text(d/'labels'/f'{split}1.txt', files)

def _flowers102(root):
    from scipy.io import savemat
    d = root/'flowers-102'
    labels = np.array([1, 2, 3] * 4)   # image_00001 ... image_00012, classes 1-3 of 102
    for i, y in enumerate(labels, 1): _img(d/'jpg'/f'image_{i:05d}.jpg', y - 1)
    savemat(d/'imagelabels.mat', {'labels': labels[None].astype(np.uint8)})
    savemat(d/'setid.mat', {'trnid': np.array([[1, 2, 3]], np.uint16), 'valid': np.array([[4, 5, 6]], np.uint16),
                            'tstid': np.array([[7, 8, 9, 10, 11, 12]], np.uint16)})

def _stanford_cars(root):
    from scipy.io import savemat
    d = root/'stanford_cars'
    fields = [(f, 'O') for f in ('bbox_x1', 'bbox_y1', 'bbox_x2', 'bbox_y2', 'class', 'fname')]
    for split, ys in (('train', [1, 2, 3, 1, 2, 3]), ('test', [3, 2, 1])):
        annos = np.zeros(len(ys), dtype=fields)
        for i, y in enumerate(ys):
            annos[i] = (1, 1, 11, 9, y, f'{i+1:05d}.jpg')
            _img(d/f'cars_{split}'/f'{i+1:05d}.jpg', y - 1)
        (d/'devkit').mkdir(parents=True, exist_ok=True)
        fn = d/'devkit'/'cars_train_annos.mat' if split == 'train' else d/'cars_test_annos_withlabels.mat'
        savemat(fn, {'annotations': annos})
    savemat(d/'devkit'/'cars_meta.mat', {'class_names': np.array([['AM General Hummer SUV 2000', 'Acura RL Sedan 2012',
                                                                  'Acura TL Sedan 2012']], dtype=object)})

def _places365(root):
    cats = ['/a/airfield', '/a/airplane_cabin', '/a/airport_terminal']
    _text(root/'categories_places365.txt', [f'{c} {i}' for i, c in enumerate(cats)])
    train = [f'{c}/{j:08d}.jpg {i}' for i, c in enumerate(cats) for j in (1, 2)]
    for l in train: _img(root/'data_256_standard'/l.split()[0].lstrip('/'), int(l.split()[1]))   # the 256x256 images
    val = [f'Places365_val_{k+1:08d}.jpg {k % 3}' for k in range(4)]
    for l in val: _img(root/'val_256'/l.split()[0], int(l.split()[1]))
    _text(root/'places365_train_standard.txt', train); _text(root/'places365_val.txt', val)

def _cub200(root):
    d, classes = root/'CUB_200_2011', ['001.Black_footed_Albatross', '002.Laysan_Albatross', '003.Sooty_Albatross']
    images, labels, split = [], [], []
    for i, c in enumerate(classes):
        for j in range(4):   # 3 train, 1 test per class
            k = len(images) + 1
            f = f'{c}/{c[4:]}_{j:04d}_{k}.jpg'
            _img(d/'images'/f, i, grey=(k == 1))   # one grey image, as CUB has
            images.append(f'{k} {f}'); labels.append(f'{k} {i+1}'); split.append(f'{k} {int(j < 3)}')
    _text(d/'images.txt', images); _text(d/'image_class_labels.txt', labels); _text(d/'train_test_split.txt', split)
    _text(d/'classes.txt', [f'{i+1} {c}' for i, c in enumerate(classes)])

def _imagenet(root):
    wnids = ['n01440764', 'n01443537', 'n01484850']
    for i, w in enumerate(wnids):
        for j in range(3): _img(root/'train'/w/f'{w}_{j+1}.JPEG', i, grey=(i == j == 0))   # ImageNet has grey JPEGs too
        for j in range(2): _img(root/'val'/w/f'ILSVRC2012_val_{10*i + j + 1:08d}.JPEG', i)

_makers = dict(imagenet=_imagenet, places365=_places365, cifar10=_cifar10, cifar100=_cifar100,
               stanford_cars=_stanford_cars, food101=_food101, sun397=_sun397, oxford_pets=_oxford_pets, stl10=_stl10,
               fgvc_aircraft=_fgvc_aircraft, dtd=_dtd, cub200=_cub200, flowers102=_flowers102)
tiny_names = list(_makers)

# name -> (classes, train images, test images) of the tiny copy (Flowers-102's class names are torchvision's fixed 102)
tiny_sizes = dict(imagenet=(3, 9, 6), places365=(3, 6, 4), cifar10=(3, 10, 4), cifar100=(3, 7, 3),
                  stanford_cars=(3, 6, 3), food101=(3, 9, 6), sun397=(3, 6, 3), oxford_pets=(3, 9, 6), stl10=(3, 6, 3),
                  fgvc_aircraft=(3, 9, 6), dtd=(3, 9, 6), cub200=(3, 9, 3), flowers102=(102, 6, 6))

def make_tiny(name:str, root) -> Path:
    "Write a tiny copy of registry dataset `name` under `root`, in its real layout; returns `root` (`--data_path`)"
    if name not in _makers: raise ValueError(f"no tiny maker for {name!r}; use one of {', '.join(_makers)}")
    root = Path(root); root.mkdir(parents=True, exist_ok=True)
    _makers[name](root)
    return root

def make_tiny_hf(root, kind:str='save_to_disk', test_split:str='test') -> Path:
    "Write a tiny Hugging Face dataset (Image and ClassLabel features) to folder `root`; returns it (`--data hf:ROOT`)"
    import datasets as hfd
    root = Path(root)
    feats = hfd.Features(image=hfd.Image(), label=hfd.ClassLabel(names=['cat', 'dog', 'bird']))
    def split(ys):
        imgs = [Image.new('RGB', (12, 10), _colours[y]) for y in ys]
        return hfd.Dataset.from_dict({'image': imgs, 'label': ys}, features=feats)
    dd = hfd.DatasetDict({'train': split([0, 1, 2, 0, 1, 2, 0]), test_split: split([2, 1, 0, 1])})
    if kind == 'save_to_disk': dd.save_to_disk(str(root))
    elif kind == 'parquet':   # the Hub's layout: a file per split and shard, the features in the parquet metadata
        root.mkdir(parents=True, exist_ok=True)
        for s, ds in dd.items(): ds.to_parquet(str(root/f'{s}-00000-of-00001.parquet'))
    else: raise ValueError(f"kind={kind!r}; use 'save_to_disk' or 'parquet'")
    return root
