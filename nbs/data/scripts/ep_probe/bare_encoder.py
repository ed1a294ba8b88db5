"""The default `ep_probe` job's one unavoidable cost, alone: the embedded MAE encoder's timm `forward_features`
over the same 20,000 images (the sample's 10,000 train+validation and 10,000 test), batch 256, no probes, no cache.
Usage (from the repository root): python nbs/data/scripts/ep_probe/bare_encoder.py [bf16|none] [batch=256]
(`ep_probe` extracts in batches of 64; on a 2-core Xeon a batch of 64 runs fp32 about 30% faster than 256.)
Prints the seconds of the forward passes alone (the images are transformed to tensors first, untimed)."""
import sys, time, torch
from ep_probing.encoders import create_encoder
from ep_probing.data import fmnist_sample

prec = sys.argv[1] if len(sys.argv) > 1 else 'bf16'
if prec not in ('bf16', 'none'): sys.exit(f"bare_encoder.py: error: precision {prec!r}: use bf16 or none")
bs = sys.argv[2] if len(sys.argv) > 2 else '256'
if not bs.isdigit() or int(bs) < 1: sys.exit(f"bare_encoder.py: error: batch {bs!r}: give a positive integer, e.g. 64")
bs = int(bs)
enc = create_encoder('mae_fmnist'); m, tf = enc.model.eval(), enc.transform()
splits = (fmnist_sample('train'), fmnist_sample('test'))
x = torch.cat([torch.stack([tf(ds[i][0]) for i in range(len(ds))]) for ds in splits])   # (20000, 1, 28, 28)
with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16, enabled=prec == 'bf16'):
    t = time.perf_counter()
    for i in range(0, len(x), bs): m.forward_features(x[i:i + bs])
    s = time.perf_counter() - t
isa = torch.backends.cpu.get_cpu_capability()
print(f"bare encoder pass ({prec}, batch {bs}, {isa}): {len(x):,} images in {s:.1f} s")
