"""Train probes on synthetic tokens, alone or under `torchrun --nproc_per_node=N` (driven by test_fit.py).
Usage: python tests/ddp_fit.py OUT [--epochs E] [--resume] [--die-after-epoch K]"""
import os, torch, argparse
from pathlib import Path
from fastai.data.core import DataLoaders
from fastai.callback.core import Callback
from fastai.torch_core import rank_distrib, num_distrib
from ep_probing.fit import fit_probes

def synthetic_tokens(n=512, N=36, C=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    patch = torch.randn(n, 1, N, C, generator=g)
    patch[torch.arange(n), :, torch.randint(0, N, (n,), generator=g), :2] += (2. * y - 1)[:, None, None] * 4
    return list(zip(patch, torch.randn(n, 1, 1, C, generator=g), y))

class Die(Callback):
    "Kill the process hard (no cleanup) once epoch `k` is complete and checkpointed"
    order = 100
    def __init__(self, k): self.k = k
    def after_epoch(self):
        if self.epoch == self.k: os._exit(9)

if __name__ == '__main__':
    a = argparse.ArgumentParser(); a.add_argument('out'); a.add_argument('--epochs', type=int, default=3)
    a.add_argument('--resume', action='store_true'); a.add_argument('--die-after-epoch', type=int, default=None)
    a = a.parse_args()
    torch.set_num_threads(1)
    bs = 32 // max(num_distrib(), 1)                                 # the same global batch on any number of processes
    dls = DataLoaders.from_dsets(synthetic_tokens(), synthetic_tokens(seed=1), bs=bs, shuffle=True)
    learn = fit_probes(dls, ['gap', 'ep:num_queries=4,blr=0.1|0.5'], 2, 32, epochs=a.epochs, out=a.out, layer_order=[0], opt='adamw',
                       blr=0.5, progress=False, resume=a.resume, cbs=[Die(a.die_after_epoch)] if a.die_after_epoch is not None else None)
    out = Path(a.out)
    (out.parent/f'{out.name}.rank{rank_distrib()}.json').write_text(learn.results.reset_index().to_json(orient='records'))
    torch.save({k: v for k, v in learn.model.probes.state_dict().items()}, out.parent/f'{out.name}.rank{rank_distrib()}.pt')
