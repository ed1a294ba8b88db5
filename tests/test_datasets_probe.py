"""`ep_probe --data NAME --data_path ROOT` for one epoch on a tiny on-disk copy of every dataset known by name (in its real
layout, written by tests/tiny_datasets.py), and on Hugging Face datasets (`save_to_disk` and parquet)."""
import json, sys, warnings
from pathlib import Path
import pytest
from fastcore.script import anno_parser
from ep_probing.cli import ep_probe
from ep_probing.datasets import dataset_registry

sys.path.insert(0, str(Path(__file__).parent))
from tiny_datasets import make_tiny, make_tiny_hf, tiny_sizes   # noqa: E402

ONE_EPOCH = ['--epochs', '1', '--probes', 'lp,ep:num_queries=2', '--blrs', 'none', '--bs', '4', '--valid_pct', '0.3']


def run(args, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, 'argv', ['ep_probe', *args])
    ns = anno_parser(ep_probe).parse_args([*args, *ONE_EPOCH, '--out', str(tmp_path/'o'), '--cache_dir', str(tmp_path/'c')])
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')                                # the tiny copies are not the official sizes: said once
        ep_probe(**{k: v for k, v in vars(ns).items() if k not in ('pdb', 'xtra')})
    return capsys.readouterr().out


@pytest.mark.parametrize('name', list(dataset_registry))
def test_one_epoch_on_every_named_dataset(name, tmp_path, monkeypatch, capsys):
    root = make_tiny(name, tmp_path/'data')
    out = run(['--data', name, '--data_path', str(root)], tmp_path, monkeypatch, capsys)
    k, n_train, n_test = tiny_sizes[name]
    assert f'on {name} ({k} classes)' in out, out
    res = json.loads((tmp_path/'o'/'results.json').read_text())
    assert [r['probe'] for r in res] == ['lp', 'ep_num_queries=2'] and all(0 <= r['test_top1'] <= 1 for r in res)
    meta = json.loads((tmp_path/'o'/'meta.json').read_text())
    assert (meta['data'], meta['n_train'] + meta['n_valid'], meta['n_test']) == (name, n_train, n_test)


@pytest.mark.parametrize('kind', ['save_to_disk', 'parquet'])
def test_one_epoch_on_a_hugging_face_dataset(kind, tmp_path, monkeypatch, capsys):
    root = make_tiny_hf(tmp_path/'hf', kind)
    out = run(['--data', f'hf:{root}'], tmp_path, monkeypatch, capsys)
    assert 'on hf:hf' in out and (tmp_path/'o'/'results.json').exists(), out


def test_named_dataset_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, 'argv', ['ep_probe'])
    with pytest.raises(SystemExit) as e:
        run(['--data', 'cifar100', '--data_path', str(tmp_path/'nothing')], tmp_path, monkeypatch, capsys)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith('ep_probe: error: cifar100: no CIFAR-100 at ') and len(err.strip().splitlines()) == 1, err
    assert 'cifar-100-python' in err and not (tmp_path/'c').exists()
