"""`ep_probe` under torchrun with test hooks (driven by test_ddp_run.py): small shards, and a rank killed on cue.
Usage: torchrun --nproc_per_node=2 tests/ddp_probe.py [ep_probe flags]
Environment: EP_TEST_SHARD=128 (images per cache shard); EP_TEST_DIE=extract:R:K (rank R SIGKILLs itself once it has
written K shards) or train:R:E (rank R SIGKILLs itself once rank 0 has checkpointed epoch E)."""
import os, signal, sys
from functools import partial
from fastai.callback.core import Callback
import ep_probing.cache as cache, ep_probing.fit as fit
from ep_probing.dist import rank, barrier
from ep_probing.cli import ep_probe_main

def die(): os.kill(os.getpid(), signal.SIGKILL)             # no cleanup, no finally: as the OOM killer does it

class DieAfterEpoch(Callback):
    "Rank `who` dies once every rank has finished epoch `e` (rank 0's `Checkpoint`, order 70, has saved it)"
    order = 100
    def __init__(self, who:int, e:int): self.who, self.e = who, e
    def after_epoch(self):
        if self.epoch + 1 != self.e: return
        barrier()
        if rank() == self.who: die()

stage, who, k = (os.environ.get('EP_TEST_DIE') or '::').split(':')
cache.extract_features = partial(cache.extract_features, shard_size=int(os.environ.get('EP_TEST_SHARD', 1024)))
if stage == 'extract' and rank() == int(who):
    write, done = cache._write, []
    def _write(s, buf):
        write(s, buf); done.append(s)
        if len(done) == int(k): die()
    cache._write = _write
if stage == 'train':
    callbacks = fit._fit_callbacks
    fit._fit_callbacks = lambda *a, **kw: callbacks(*a, **kw) + [DieAfterEpoch(int(who), int(k))]

if __name__ == '__main__': sys.exit(ep_probe_main())
