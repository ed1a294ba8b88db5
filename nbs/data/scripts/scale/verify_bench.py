"""Images/s of `verify_images` (the full decode an image folder gets when it loads) on an ImageNet-like JPEG folder:
one process (the old way) against worker processes (the default from 2,000 files a rank), interleaved twice
  python nbs/data/scripts/scale/verify_bench.py nbs/data/scale_workers 4096"""
import json, os, sys, time, torch
from pathlib import Path
from ep_probing.bench_train import fake_imagenet, _cpu_name
from ep_probing.data import image_samples, verify_images
out, n = Path(sys.argv[1]), int(sys.argv[2])
d = fake_imagenet('/tmp/scale/v/fi', n)
classes = sorted(p.name for p in (d/'train').iterdir())
files = [f for f, _ in image_samples(d/'train', {c: i for i, c in enumerate(classes)})]
auto = 0 if len(files) < 2000 else min(8, os.cpu_count() or 1)
rows = []
for rep in range(2):
    for w in (0, auto):
        t = time.perf_counter(); good = verify_images(files, workers=w); s = time.perf_counter() - t
        assert good == files
        rows.append(dict(rep=rep, workers=w, images=len(files), wall_s=s, images_per_s=len(files) / s))
        print(rows[-1], flush=True)
rate = {w: max(r['images_per_s'] for r in rows if r['workers'] == w) for w in (0, auto)}
imagenet = 1_281_167 + 50_000
rec = dict(rows=rows, auto_workers=auto, ratio=rate[auto] / rate[0],
           imagenet_1k_minutes={f'{w} workers': imagenet / r / 60 for w, r in rate.items()},
           cpu=_cpu_name(), cores=os.cpu_count(), threads=torch.get_num_threads(), load_average=os.getloadavg(),
           date=time.strftime('%Y-%m-%d'))
print({k: rec[k] for k in ('ratio', 'imagenet_1k_minutes')})
out.mkdir(parents=True, exist_ok=True)
(out/'verify.json').write_text(json.dumps(rec, indent=1) + '\n')
(out/'verify.command.json').write_text(json.dumps(dict(
    command=f'python nbs/data/scripts/scale/verify_bench.py {out} {n}', cpu=_cpu_name(), date=rec['date'],
    note='verify_images alone (a full PIL decode of each file), 0 workers against the default for this many files, '
         'interleaved twice; the fastest of each taken for the ratio and for the ImageNet-1k minutes (1,331,167 '
         'files, one process of this machine; under torchrun each rank checks 1/N of them)'), indent=1) + '\n')
