"""`fit_probes` under `torchrun` on CUDA with the nccl backend (run by tests/gpu_check.sh); writes OUT/ddp.json.
Usage: torchrun --nproc_per_node=N tests/gpu_ddp.py OUT [--epochs E] [--cpu]
fit_probes adds `ProbeDistributedTrainer` itself when torchrun starts 2+ processes. With one GPU there is one process
(nccl refuses two ranks on one device), so this script passes that callback explicitly: the same code then runs
(SyncBatchNorm, `_DistributedDL` with nccl broadcasts, metrics gathered across ranks). Gradient all-reduce between ranks needs 2+ GPUs:
accelerate (1.16) wraps a CUDA model in DistributedDataParallel only for 2+ processes; ddp.json records what was wrapped. `--cpu`: gloo on the CPU (tests)."""
import argparse, json, os, sys
from pathlib import Path
import torch
from fastai.callback.core import Callback
from fastai.data.core import DataLoaders
from fastai.torch_core import rank_distrib, num_distrib
sys.path.insert(0, str(Path(__file__).parent))
from ddp_fit import synthetic_tokens
from ep_probing.fit import fit_probes
from ep_probing.engine import ProbeDistributedTrainer

class Inspect(Callback):
    "Record, once training starts, what the distributed callback made of the model and the data"
    order = 12                                                # after DistributedTrainer (11) has wrapped them
    def before_train(self):
        if hasattr(self, 'seen'): return
        dist = torch.distributed.is_available() and torch.distributed.is_initialized()
        self.seen = dict(world_size=num_distrib(), rank=rank_distrib(), backend=torch.distributed.get_backend() if dist else None,
                         model=type(self.learn.model).__name__, dl=type(self.learn.dl).__name__,
                         sync_batchnorm=any(isinstance(m, torch.nn.SyncBatchNorm) for m in self.learn.model.modules()),
                         param_device=str(next(self.learn.model.parameters()).device), batch_device=None)
    def after_batch(self):
        if self.seen['batch_device'] is None: self.seen['batch_device'] = str(self.learn.xb[0].device)

if __name__ == '__main__':
    a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument('out', help='output folder: fit_probes results and ddp.json')
    a.add_argument('--epochs', type=int, default=1, help='training epochs')
    a.add_argument('--cpu', action='store_true', help='gloo on the CPU instead of nccl on CUDA (to test this script without a GPU)')
    a = a.parse_args()
    if 'LOCAL_RANK' not in os.environ: sys.exit('gpu_ddp.py: error: start it with torchrun --nproc_per_node=N')
    if a.cpu: os.environ['ACCELERATE_USE_CPU'] = 'true'
    elif not torch.cuda.is_available(): sys.exit('gpu_ddp.py: error: no CUDA GPU (torch.cuda.is_available() is False); use --cpu to test on the CPU')
    else: torch.cuda.set_device(int(os.environ['LOCAL_RANK']))
    torch.set_num_threads(1)
    bs = 32 // max(num_distrib(), 1)                          # the same global batch on any number of processes
    dls = DataLoaders.from_dsets(synthetic_tokens(), synthetic_tokens(seed=1), bs=bs, shuffle=True, pin_memory=not a.cpu)
    ins = Inspect()
    cbs = [ins] + ([ProbeDistributedTrainer(sync_bn=not a.cpu)] if num_distrib() == 1 else [])   # 2+: fit_probes adds it
    learn = fit_probes(dls, ['gap', 'ep:num_queries=4'], 2, 32, epochs=a.epochs, out=a.out, layer_order=[0], opt='adamw',
                       blr=0.5, progress=False, cbs=cbs)
    rec = dict(ins.seen, explicit_trainer=num_distrib() == 1, epochs=a.epochs,
               top1={k: float(v) for k, v in learn.results.top1.items()}, train_s=float(learn.results.train_s.iloc[0]))
    print(json.dumps(rec))
    expect = 'gloo' if a.cpu else 'nccl'
    ok = rec['backend'] == expect and rec['dl'] == '_DistributedDL' and (a.cpu or rec['param_device'].startswith('cuda') and rec['sync_batchnorm'])
    if rank_distrib() == 0: (Path(a.out)/'ddp.json').write_text(json.dumps(dict(rec, ok=ok), indent=1))
    if not ok: sys.exit(f'gpu_ddp.py: error: expected the {expect} backend, _DistributedDL batches' + ('' if a.cpu else ', CUDA parameters and SyncBatchNorm') + f'; got {rec}')
