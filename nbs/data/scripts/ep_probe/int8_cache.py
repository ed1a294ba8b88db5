"""Simulate an int8 cache with a per-token scale: each cached token x (C channels) stored as round(x / s) in int8,
s = max|x| / 127, and read back as q * s (then kept in the fp16 cache); the default job then trains on the read-back
tokens. Usage: ep_probe --out A --cache_dir ROOT   (the fp16 cache of the default job)
       python nbs/data/scripts/ep_probe/int8_cache.py ROOT ROOT8 && ep_probe --out B --cache_dir ROOT8"""
import json, shutil, sys, numpy as np
from pathlib import Path
from ep_probing.shards import read_shard, write_shard, write_manifest
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
shutil.rmtree(dst, ignore_errors=True); shutil.copytree(src, dst)
err = []
for d in dst.iterdir():
    m = json.loads((d/'manifest.json').read_text())
    for s in m['shards']:
        a = {k: np.array(v) for k, v in read_shard(d/s, mmap=False).items()}
        for k in ('patch', 'prefix'):
            x = a[k].astype(np.float32)                                        # (n, L, N, C)
            scale = np.abs(x).max(-1, keepdims=True) / 127                     # per token
            q = np.clip(np.rint(x / np.where(scale > 0, scale, 1)), -127, 127).astype(np.int8)
            y = (q.astype(np.float32) * scale).astype(np.float16)
            err.append(np.abs(y.astype(np.float32) - x).max() / np.abs(x).max())
            a[k] = y
        shutil.rmtree(d/s); write_shard(d/s, **a)
    write_manifest(d, m['key'], m['n'], len(m['shards']))
print(f"max relative error (to each array's max |x|): {max(err):.4f}")
