"""Extraction images/s on an ImageNet-like JPEG folder: one DataLoader a shard (before) vs one for the extraction
(after)
  python nbs/data/scripts/scale/extract_loader_bench.py nbs/data/scale_extract 256 64 4
Both run in this process on the same images, encoder (vit_tiny at 224 px, random weights), batch size 32, 2 workers and
shard size, in REPS pairs (order alternating: AB, BA, ...); the tokens of both are compared. Prints the images/s of
each, the seconds outside the encoder's forward passes (loading, decoding, waiting for workers, writing), and the
median of the pairs' ratios (after over before): a pair runs minutes apart at most, so a shared machine's drift
cancels."""
import json, os, sys, tempfile, time, numpy as np, torch
from pathlib import Path
from torch.utils.data import DataLoader
import ep_probing.cache as cm
from ep_probing.cache import extract_features, _Transformed, _fp16, shard_arrays, array_batches
from ep_probing.bench_train import fake_imagenet, _cpu_name
from ep_probing.datasets import load_data
from ep_probing.encoders import create_encoder, timm_model

def per_shard_batches(encoder, dataset, transform, todo, shapes, batch_size, num_workers):
    "`cache._batches` before: a new DataLoader (and its workers) for each shard"
    fast = array_batches(dataset, transform)
    for i, a, b in todo:
        buf = {k: np.empty((b - a, *shapes[k]), np.int64 if k == 'labels' else np.float16) for k in shard_arrays}
        s = 0
        dl = ((fast(j, min(j + batch_size, b)) for j in range(a, b, batch_size)) if fast else
              DataLoader(_Transformed(dataset, transform, range(a, b)), batch_size=batch_size, num_workers=num_workers))
        for x, y in dl:
            out = encoder.forward_tokens(x); e = s + len(y)
            buf['patch'][s:e] = _fp16(torch.stack([p for p, _ in out.values()], 1), a + s)
            buf['prefix'][s:e] = _fp16(torch.stack([q for _, q in out.values()], 1), a + s)
            buf['labels'][s:e] = y.numpy(); s = e
            yield i, buf, s == b - a

out, n, shard, reps = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
workers, bs = 2, 32
torch.manual_seed(0)
enc = create_encoder(timm_model('vit_tiny_patch16_224', pretrained=False, num_classes=0), precision='auto')
ds, tf = load_data(str(fake_imagenet(Path(tempfile.mkdtemp())/'fi', n))).train, enc.transform()
one_loader, rows, tokens, fwd = cm._batches, [], {}, [0.]
forward = enc.forward_tokens
def timed_forward(x):                                                  # the encoder's seconds, to take out of the total
    t = time.perf_counter(); r = forward(x); fwd[0] += time.perf_counter() - t; return r
enc.forward_tokens = timed_forward
arms = (('one DataLoader a shard (before)', per_shard_batches), ('one DataLoader (after)', one_loader))
for rep in range(reps):
    for how, f in (arms if rep % 2 == 0 else arms[::-1]):
        cm._batches, fwd[0] = f, 0.
        t = time.perf_counter()
        c = extract_features(enc, ds, tempfile.mkdtemp(), transform=tf, batch_size=bs, shard_size=shard,
                             num_workers=workers, progress=False)
        secs = time.perf_counter() - t
        tokens.setdefault(how, c.get_batch(np.arange(len(c)))[0].numpy())
        rows.append(dict(rep=rep, loader=how, images=len(ds), shards=-(-len(ds) // shard), seconds=secs,
                         forward_s=fwd[0], other_s=secs - fwd[0], images_per_s=len(ds) / secs))
        print(rows[-1], flush=True)
cm._batches = one_loader
get = lambda k, how: np.array([r[k] for r in rows if r['loader'] == how])
(b, a), (bo, ao) = ([get(k, how) for how, _ in arms] for k in ('images_per_s', 'other_s'))
ratio, other = float(np.median(a / b)), float(np.median(ao / bo))
same = all(np.array_equal(v, next(iter(tokens.values()))) for v in tokens.values())
print(f"extraction of {len(ds)} JPEGs in {rows[0]['shards']} shards, {workers} workers, bs {bs}, {reps} pairs: "
      f"{np.median(b):.2f} images/s before, {np.median(a):.2f} after: x{ratio:.2f} (median of the pairs' ratios); "
      f"seconds outside the forward passes {np.median(bo):.2f} -> {np.median(ao):.2f} (x{other:.2f}); "
      f"tokens identical: {same}")
rec = dict(rows=rows, ratio_after_over_before=ratio, other_s_ratio=other, tokens_identical=same, workers=workers, bs=bs,
           shard_size=shard,
           model='vit_tiny_patch16_224', img_size=224, cpu=_cpu_name(), cores=os.cpu_count(),
           threads=torch.get_num_threads(), load_average=os.getloadavg(), date=time.strftime('%Y-%m-%d'))
out.mkdir(parents=True, exist_ok=True)
(out/'extract_loader.json').write_text(json.dumps(rec, indent=1) + '\n')
(out/'extract_loader.command.json').write_text(json.dumps(dict(
    command=f'python nbs/data/scripts/scale/extract_loader_bench.py {out} {n} {shard} {reps}', cpu=_cpu_name(),
    date=rec['date'], note='extract_features on fake_imagenet JPEGs, vit_tiny 224 px, 2 workers, bs 32; the old '
    'per-shard loader against the one loader, in pairs of alternating order in one process; other jobs shared '
    'the 2 cores (load_average)'), indent=1) + '\n')
