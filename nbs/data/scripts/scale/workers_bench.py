"""Decode+transform images/s of an ImageNet-like JPEG folder through a DataLoader: workers 0 (the old default) vs auto
  python nbs/data/scripts/scale/workers_bench.py nbs/data/scale_workers 256"""
import json, os, sys, time, torch
from pathlib import Path
from ep_probing.bench_train import fake_imagenet, _decode_s, _cpu_name
from ep_probing.datasets import load_data
from ep_probing.data import auto_workers
from ep_probing.encoders import create_encoder, timm_model
out, n = Path(sys.argv[1]), int(sys.argv[2])
d = fake_imagenet('/tmp/scale/w/fi', n)
tr = load_data(str(d)).train
tf = create_encoder(timm_model('vit_tiny_patch16_224', pretrained=False, num_classes=0)).transform()
auto = auto_workers(tr)
rows = []
for rep in range(2):
    for w in (0, auto):
        wall, cpu = _decode_s(tr, tf, 32, w)
        rows.append(dict(rep=rep, workers=w, images=len(tr), wall_s=wall, images_per_s=len(tr) / wall, cpu_s=cpu))
        print(rows[-1], flush=True)
rec = dict(rows=rows, auto_workers=auto, cpu=_cpu_name(), cores=os.cpu_count(), threads=torch.get_num_threads(),
           load_average=os.getloadavg(), date=time.strftime('%Y-%m-%d'))
out.mkdir(parents=True, exist_ok=True)
(out/'workers.json').write_text(json.dumps(rec, indent=1) + '\n')
(out/'workers.command.json').write_text(json.dumps(dict(
    command=f'python nbs/data/scripts/scale/workers_bench.py {out} {n}', cpu=_cpu_name(), date=rec['date'],
    note='decode+transform only (no encoder), the old default (0 workers) against auto_workers on this machine, '
         'interleaved twice; other jobs shared the 2 cores (load_average)'), indent=1) + '\n')
