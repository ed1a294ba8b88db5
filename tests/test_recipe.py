"""`--recipe paper`: LARS, the paper code's blr grid, gradient accumulation to the effective batch, streamed images; one epoch
on a tiny image folder with the optimiser's steps counted, and explicit flags winning over the recipe."""
import sys
import pytest
from fastcore.script import anno_parser
from PIL import Image
import ep_probing.fit as fit
from ep_probing.pipeline import run_probing
from ep_probing.cli import ep_probe
from ep_probing.config import RunConfig


def folder(root, n=40):
    "Two classes of `n` 32x32 RGB images each, in train/ and test/"
    for split in ('train', 'test'):
        for c, col in (('dark', 40), ('light', 200)):
            (root/split/c).mkdir(parents=True)
            for i in range(n if split == 'train' else 6): Image.new('RGB', (32, 32), (col, (7 * i) % 255, 90)).save(root/split/c/f'{i}.png')
    return root


@pytest.fixture
def steps(monkeypatch):
    "Count the optimiser steps of every LARS optimiser built"
    count = {'steps': 0}
    def counting(*args, **kw):
        opt = fit_lars(*args, **kw); step = opt.step
        def counted(*a, **k): count['steps'] += 1; return step(*a, **k)
        opt.step = counted
        return opt
    fit_lars = fit.Lars
    monkeypatch.setattr(fit, 'Lars', counting)
    return count


def test_recipe_paper_steps_once_per_effective_batch(tmp_path, steps):
    o = RunConfig.paper(epochs=1, accum_bs=32)                             # a tiny effective batch for a tiny folder
    assert (o.opt, o.stream, o.epochs, o.accum_bs) == ('lars', True, 1, 32)
    learn = run_probing('mae_fmnist', str(folder(tmp_path/'d')), 'lp', o, bs=8, out=None, cache_dir=str(tmp_path/'c'),
                        progress=False)
    seen = len(learn.learn.dls.train) * 8                                    # images through the encoder in the epoch (drop_last)
    assert seen >= 64 and steps['steps'] == seen // 32, (seen, steps)  # one step per 32 images, not per batch of 8
    assert len(learn.results) == 1 and len(learn.heads) == 7           # lp over the paper code's 7-point blr grid
    assert learn.fit.lrs.max() == pytest.approx(1.5 * 32 / 256)      # lr = blr x effective batch / 256
    assert not (tmp_path/'c').exists()                                 # streamed: nothing cached


def test_recipe_paper_from_the_command_line(tmp_path, monkeypatch, capsys):
    args = ['--recipe', 'paper', '--epochs', '1', '--bs', '8', '--accum_bs', '32', '--blr', '0.1', '--probes', 'lp',
            '--data', str(folder(tmp_path/'d')), '--out', str(tmp_path/'o'), '--cache_dir', str(tmp_path/'c')]
    monkeypatch.setattr(sys, 'argv', ['ep_probe', *args])
    ns = anno_parser(ep_probe).parse_args(args)
    ep_probe(**{k: v for k, v in vars(ns).items() if k not in ('pdb', 'xtra')})
    out = capsys.readouterr().out
    assert '1 epochs, lars, effective batch 32 (--recipe paper); streamed' in out, out
    assert '1 head trained' in out                                         # --blr 0.1 wins over the recipe's grid


@pytest.mark.parametrize('args, msg', [(['--recipe', 'mae'], "--recipe 'mae': use paper"),
                                       (['--accum_bs', '20', '--bs', '8'], '--accum_bs 20: the effective batch must be a multiple')])
def test_recipe_bad_flags(args, msg, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, 'argv', ['ep_probe', *args])
    ns = anno_parser(ep_probe).parse_args([*args, '--out', str(tmp_path/'o'), '--cache_dir', str(tmp_path/'c')])
    with pytest.raises(SystemExit) as e: ep_probe(**{k: v for k, v in vars(ns).items() if k not in ('pdb', 'xtra')})
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith('ep_probe: error: ') and msg in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path/'c').exists()
