"""One probing run, as `ep_probe` runs it (`run_probing`'s steps), that also records every head's TEST top-1 and
per-image correctness after each epoch (`test_curve.jsonl` in the run's folder), for issue 41 point 4: how much
choosing the best epoch on the test set (the paper code's practice) inflates a number against held-out selection.

From the repository root, with `export PYTHONPATH=$PWD`:
  nice -n 10 python nbs/data/scripts/protocol_run.py --recipe paper --train_size 4560 --out DIR [--resume]
  python nbs/data/scripts/protocol_run.py --out DIR          # the default job (ep_probe's defaults), same records
  nice -n 10 python nbs/data/scripts/protocol_run.py --recipe paper --cached --out DIR    # the recipe, no streaming
Any other `--flag value` is a RunConfig option (as `ep_probe` takes it). The test images are passed through the
frozen encoder once (the test transform has no randomness) and their tokens kept in memory; each epoch the heads
are evaluated on them, in the precision they train in, as the run's final test evaluation does. With `--resume` the
rows of an epoch run again replace the earlier ones (the reader keeps the last row of each epoch and head)."""
import argparse, json, time
from functools import partial
from pathlib import Path
import torch
from fastai.callback.core import Callback
from ep_probing.cli import run_config
from ep_probing.config import RunConfig, precision_dtype
from ep_probing.engine import unwrap
from ep_probing.fit import fit_probes, evaluate_probes, accum_batch, check_epoch_batch
from ep_probing.pipeline import _write_meta
from ep_probing.prepare import Prepared
from ep_probing.run_folder import RunFolder
from ep_probing.stats import pack_correct


class TestCurve(Callback):
    "After each epoch: every head's test top-1 and per-image correctness, appended to `path` (JSON lines)"
    order = 60                                      # after the Recorder, before BestHeads/HalveGrid/Checkpoint

    def __init__(self, test_dl, path, precision:str='none'):
        self.test_dl, self.path, self.precision, self.toks = test_dl, Path(path), precision, None

    def _tokens(self, model)->list:
        "The test set as `(patch, prefix, y)` batches: through the encoder once (streamed runs), else as loaded"
        if self.toks is None:
            dt, dev, toks = precision_dtype(self.precision), model.device, []
            with torch.no_grad():
                for *xb, y in self.test_dl:
                    with torch.autocast(dev.type, dtype=dt, enabled=dt is not None):
                        toks.append((*model.tokens(*[x.to(dev) for x in xb]), y))
            self.toks = toks
        return self.toks

    def after_validate(self): self.validated = True   # epochs a resume skips run after_epoch but never validate

    def after_epoch(self):
        if not getattr(self, 'validated', False): return
        self.validated = False
        model, t0 = unwrap(self.learn.model), time.perf_counter()
        res = evaluate_probes(model, self._tokens(model), precision=self.precision, per_image=True)
        specs = model.specs
        with open(self.path, 'a') as f:
            for k, v in res.items():
                s = specs[k]
                f.write(json.dumps(dict(epoch=self.learn.epoch, probe=s.group or s.label, head=s.label,
                                        blr=float(s.base_lr), test_top1=v['top1'], n_test=len(v['correct']),
                                        correct=pack_correct(v['correct']))) + '\n')
        print(f"test curve: epoch {self.learn.epoch}, {len(res)} heads, {time.perf_counter() - t0:.1f}s", flush=True)


def run(encoder='mae_fmnist', data='fashion_mnist_sample', probes='lp,gap,ep,mhca', recipe=None, **options):
    "`run_probing`'s steps with a `TestCurve`; returns the `ProbeFit`"
    # every option given wins over the recipe, also one equal to RunConfig's default (stream=False after --recipe paper)
    cfg = RunConfig.of(run_config(recipe, **options), **options)
    record = dict(encoder=encoder, data=data, probes=probes)
    accum_batch(cfg.bs, cfg.accum_bs)
    folder = RunFolder(cfg.out, cfg.resume)
    with folder.hold():
        folder.check_resume({**cfg.record(), **record})
        p = Prepared(encoder, data, cfg)
        check_epoch_batch(len(p.tr_idx), p.bs, cfg.accum_bs)
        specs, heads = p.heads(probes, opt=cfg.opt, blrs=cfg.blrs, blr=cfg.blr, lr=cfg.lr,
                               batch=accum_batch(p.bs, cfg.accum_bs))
        dls = p.dls
        curve = TestCurve(p.test_dl, folder.work/'test_curve.jsonl', cfg.head_precision)
        return fit_probes(dls, specs, len(p.classes), p.dim, cfg, out=folder, meta=p.meta, test_dl=p.test_dl,
                          encoder=p.enc if p.stream else None, layer_order=p.layers, depth=p.depth, heads=heads,
                          record=record, finish=partial(_write_meta, p=p, cfg=cfg), cbs=[curve])


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--out', required=True)
    ap.add_argument('--recipe', default=None)                         # 'paper': RunConfig.paper()
    ap.add_argument('--resume', action='store_true')
    ap.add_argument('--data', default='fashion_mnist_sample')
    for k in ('train_size', 'test_size', 'epochs', 'accum_bs', 'bs'): ap.add_argument(f'--{k}', type=int)
    ap.add_argument('--cache_dir')
    ap.add_argument('--cached', action='store_true')                  # cached tokens even with --recipe paper
    a = vars(ap.parse_args())
    opts = {k: v for k, v in a.items() if v is not None and k not in ('recipe', 'data', 'cached')}
    if a['cached']: opts['stream'] = False
    t0 = time.perf_counter()
    fit = run(data=a['data'], recipe=a['recipe'], **opts)
    print(fit.results[['test_top1', 'top1', 'best_epoch', 'blr']].to_string())
    print(f"total {time.perf_counter() - t0:.1f}s", flush=True)
