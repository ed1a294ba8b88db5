"""Hosts the tests stand in for, at torch's level: CPUs with and without native bf16, GPUs of each kind, and a node
whose driver is gone. Every CUDA query a real host answers without the driver is answered; every other CUDA call
(`torch.cuda._lazy_init`, which each real CUDA operation goes through, even from C++) raises `CUDATouched` and is
recorded, so a test sees where a run would first touch the GPU."""
from contextlib import ExitStack, contextmanager
from unittest import mock


class CUDATouched(RuntimeError):
    "A CUDA call a stand-in host cannot answer: on a driverless node it fails; on a pretend GPU it is real work"


def _raise(name, calls):
    def f(*a, **k):
        calls.append(name); raise CUDATouched(f"torch.cuda.{name}: the stand-in host has no driver")
    return f


# what a real host answers without creating a CUDA context; `device_info` and fastai ask these
queries = ('is_available', 'device_count', 'get_device_capability', 'get_device_name', 'is_bf16_supported')
# what needs the driver: current_device, set_device and get_device_properties call _lazy_init first, like tensors do
touching = ('_lazy_init', 'current_device', 'set_device', 'get_device_properties', 'synchronize', 'mem_get_info')

gpus = {'V100': ('Tesla V100-SXM2-16GB', (7, 0)), 'T4': ('Tesla T4', (7, 5)), 'A100': ('NVIDIA A100-SXM4-40GB', (8, 0)),
        'H100': ('NVIDIA H100 80GB HBM3', (9, 0)), 'MI250': ('AMD Instinct MI250X', (9, 0))}
cpus = {'AVX2': (False, False), 'avx512_bf16': (True, False), 'AMX': (True, True)}   # (avx512_bf16, AMX tiles)


@contextmanager
def host(gpu:str=None, # a key of `gpus`; None: a CPU host (see `driverless`)
         cpu:str='AVX2', # a key of `cpus`: the CPU's bf16 units
         count:int=1, # GPUs on the node
         driverless:bool=False, # CUDA says it is available, and every other CUDA call raises (a broken driver)
        ):
    "Stand in for a host; yields the list of CUDA calls that raised"
    calls, bf16, amx = [], *cpus[cpu]
    with ExitStack() as s:
        p = lambda target, v: s.enter_context(mock.patch(target, v))
        p('torch.cpu._is_avx512_bf16_supported', lambda: bf16); p('torch.cpu._is_amx_tile_supported', lambda: amx)
        p('torch.version.hip', '6.2' if gpu == 'MI250' else None)
        for n in touching: p(f'torch.cuda.{n}', _raise(n, calls))
        if gpu is None:
            p('torch.cuda.is_available', lambda: driverless)
            for n in queries[1:]: p(f'torch.cuda.{n}', _raise(n, calls))
        else:
            name, cap = gpus[gpu]
            p('torch.cuda.is_available', lambda: True); p('torch.cuda.device_count', lambda: count)
            p('torch.cuda.get_device_capability', lambda d=None: cap); p('torch.cuda.get_device_name', lambda d=None: name)
            p('torch.cuda.is_bf16_supported', lambda including_emulation=True: cap >= (8, 0) or including_emulation)
        yield calls
