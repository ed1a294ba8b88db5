"""The GPU path decided once, on every kind of host, tested on the CPU (issue 49): each host is a stand-in at torch's
level (`standin.host`), and each test asks the real code what it decides there: the precisions and autocast dtype,
loss scaling, pinned memory, the process group's backend and each local rank's device, and `--decode gpu`."""
from functools import partial
from pathlib import Path
from unittest import mock
import os, sys, warnings
import pytest, torch
from PIL import Image
from fastai.callback.fp16 import MixedPrecision
from ep_probing.cli import ep_probe
from ep_probing.config import RunConfig, precision_dtype
from ep_probing.data import stream_dls
from ep_probing.dist import init_distributed
from ep_probing.encoders import create_encoder
from ep_probing.engine import amp_callback, CPUAutocast
from ep_probing.prepare import Prepared
sys.path.insert(0, str(Path(__file__).parent))
import console, standin   # noqa: E402
from standin import host, CUDATouched   # noqa: E402

TINY = ['--train_size', '300', '--test_size', '100', '--epochs', '1', '--probes', 'gap', '--blrs', '0.1']
run_cli = partial(console.run_cli, ep_probe)

# host: (device, 'auto' precision, autocast dtype, loss scaling, pinned memory, backend, --decode gpu allowed)
matrix = {
    'AVX2': ('cpu', 'none', None, False, False, 'gloo', False),
    'avx512_bf16': ('cpu', 'bf16', torch.bfloat16, False, False, 'gloo', False),
    'AMX': ('cpu', 'bf16', torch.bfloat16, False, False, 'gloo', False),
    'V100': ('cuda', 'fp16', torch.float16, True, True, 'nccl', True),
    'T4': ('cuda', 'fp16', torch.float16, True, True, 'nccl', True),
    'A100': ('cuda', 'bf16', torch.bfloat16, False, True, 'nccl', True),
    'H100': ('cuda', 'bf16', torch.bfloat16, False, True, 'nccl', True),
    'MI250': ('cuda', 'bf16', torch.bfloat16, False, True, 'nccl', False),   # ROCm: bf16 native, no nvJPEG
}


def stand_in(name:str, **kw): return host(cpu=name, **kw) if name in standin.cpus else host(gpu=name, **kw)


@pytest.mark.parametrize('name', list(matrix))
def test_precision_and_loss_scaling(name):
    dev, prec, dtype, scaling, *_ = matrix[name]
    with stand_in(name) as calls:
        cfg = RunConfig()                                                   # --device left out: CUDA where present
        assert (cfg.torch_device, cfg.extract_precision, cfg.head_precision) == (dev, prec, prec), cfg.precision_reason
        assert precision_dtype(cfg.extract_precision) == dtype
        cb = amp_callback(cfg.head_precision, cfg.torch_device)             # what `fit_learner` trains the heads with
        assert (isinstance(cb, MixedPrecision) and cb.amp_mode.value == 'fp16') == scaling   # fastai's GradScaler
        assert isinstance(cb, CPUAutocast) == (dev == 'cpu' and prec == 'bf16')
        assert ('no native bf16' in cfg.precision_reason) == (prec != 'bf16'), cfg.precision_reason
    assert calls == []


def test_v100_header_reason_and_explicit_bf16_warns_once():
    with host(gpu='V100'):
        assert RunConfig(device='cuda').precision_reason == 'Tesla V100-SXM2-16GB: no native bf16'
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter('always')
            cfg = RunConfig(device='cuda', precision='bf16')
            assert (cfg.extract_precision, cfg.head_precision) == ('bf16', 'bf16')
        assert [str(x.message) for x in w] == [
            "precision='bf16': Tesla V100-SXM2-16GB emulates bf16, which runs slower than precision='fp16' there"]
        assert RunConfig(device='cuda', precision='fp16').extract_precision == 'fp16'


@pytest.mark.parametrize('name', list(matrix))
def test_pinned_memory(name, tmp_path):
    dev, *_, pin, _, _ = matrix[name]
    enc = create_encoder('mae_fmnist')                                     # on the CPU: nothing moves to the GPU
    ds = [(Image.new('L', (28, 28)), i % 2) for i in range(8)]
    with stand_in(name):
        dls, test_dl = stream_dls(enc, ds, ds, torch.arange(6), torch.arange(6, 8), 2, device=RunConfig().torch_device)
    assert (dls.train.fake_l.pin_memory, test_dl.fake_l.pin_memory) == (pin, pin)


@pytest.mark.parametrize('name', list(matrix))
def test_backend_and_device_of_each_local_rank(name):
    dev, *_, backend, _ = matrix[name]
    for k in range(4):
        env = dict(WORLD_SIZE='4', RANK=str(k), LOCAL_RANK=str(k), MASTER_ADDR='127.0.0.1', MASTER_PORT='29500')
        with stand_in(name, count=4), mock.patch.dict(os.environ, env), \
             mock.patch('torch.cuda.set_device') as set_device, \
             mock.patch('torch.distributed.is_initialized', return_value=False), \
             mock.patch('torch.distributed.rendezvous', return_value=iter([('store', k, 4)])), \
             mock.patch('torch.distributed.init_process_group') as init:
            device = RunConfig().torch_device
            assert init_distributed(device)
        assert device == (f'cuda:{k}' if dev == 'cuda' else 'cpu')
        assert init.call_args.args == (backend,) and init.call_args.kwargs['rank'] == k
        assert [c.args for c in set_device.call_args_list] == ([(device,)] if dev == 'cuda' else [])


@pytest.mark.parametrize('name', list(matrix))
def test_decode_gpu_allowed_or_refused(name):
    *_, allowed = matrix[name]
    with stand_in(name):
        with pytest.raises((ValueError, CUDATouched)) as e:
            Prepared('mae_fmnist', 'fashion_mnist_sample', RunConfig(decode='gpu'))
    # allowed: the decision passes, and the run stops at its first real CUDA operation (the encoder moving there)
    assert isinstance(e.value, CUDATouched) == allowed, e.value
    if not allowed: assert '--decode gpu needs CUDA' in str(e.value) or "decode='gpu' needs CUDA" in str(e.value)


def test_v100_fp16_probe_gets_past_every_decision(tmp_path, monkeypatch, capsys):
    "`ep_probe --device cuda --precision fp16` on a V100 stand-in stops only at the first real CUDA operation"
    with host(gpu='V100') as calls, pytest.raises(CUDATouched) as e:
        run_cli(monkeypatch, capsys, [*TINY, '--device', 'cuda', '--precision', 'fp16', '--out', tmp_path/'o',
                                      '--cache_dir', tmp_path/'c'])
    assert calls == ['_lazy_init'], calls                                   # the first CUDA work, nothing before it
    frames = [(Path(f.path).name, f.name) for f in e.traceback]
    assert ('encoders.py', 'create_encoder') in frames, frames             # the encoder moving to the GPU
    assert not (tmp_path/'c').exists() and not list((tmp_path/'o').glob('*.csv'))


def test_create_encoder_resolves_on_the_device_it_is_given():
    "From Python: fp16 without a device is one line saying to pass it; on a V100 it passes, to the first CUDA work"
    with pytest.raises(ValueError, match=r"^precision='fp16' runs on a GPU: pass device='cuda' to create_encoder"):
        create_encoder('mae_fmnist', precision='fp16')
    with host(gpu='V100') as calls, pytest.raises(CUDATouched):
        create_encoder('mae_fmnist', precision='fp16', device='cuda')
    assert calls == ['_lazy_init']                                          # moving the weights: the first CUDA work
    assert create_encoder('mae_fmnist', precision='auto').precision == RunConfig(device='cpu').extract_precision
