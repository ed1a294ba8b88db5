"""The default `ep_probe` job against its one unavoidable cost, side by side: bare encoder pass, ep_probe with an empty
cache, bare pass again, ... (`pairs` ep_probe runs, each between two bare passes). Prints one line per run and a JSON
summary: every ep_probe wall time over the mean of the bare passes just before and after it, and the median ratio.
Usage (from the repository root): python nbs/data/ep_probe/ratio.py [pairs=3] [ep_probe flags...]
With `--precision none` (or `--fp32`) the bare passes run in fp32 too. With `--out DIR` among the flags, the last run's output stays in DIR (each run writes there in turn)."""
import json, re, subprocess, sys, tempfile, time, statistics
from pathlib import Path

here = Path(__file__).parent
pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
flags = sys.argv[2:]
fp32 = '--fp32' in flags or ('--precision' in flags and flags[flags.index('--precision') + 1] == 'none')
prec = 'none' if fp32 else 'bf16'                      # the bare pass in the precision ep_probe extracts in

def bare()->float:
    out = subprocess.run([sys.executable, str(here/'bare_encoder.py'), prec], capture_output=True, text=True,
                         check=True).stdout
    s = float(re.search(r'in ([\d.]+) s', out).group(1)); print(out.strip(), flush=True); return s

def ep_probe()->dict:
    with tempfile.TemporaryDirectory() as d:
        out = [] if '--out' in flags else ['--out', f'{d}/out']
        t = time.perf_counter()
        r = subprocess.run(['/usr/bin/time', '-f', 'maxrss_kb %M', 'ep_probe', *out, '--cache_dir', f'{d}/cache', *flags],
                           capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t
    ext = [float(x) for x in re.findall(r'extracted .* in ([\d.]+) s', r.stdout)]
    train, inside = map(float, re.search(r'in ([\d.]+)s \(([\d.]+)s in all\)', r.stdout).groups())
    print(f"ep_probe: {wall:.1f} s wall (extraction {' + '.join(map(str, ext))} s, training {train} s)", flush=True)
    rss = int(re.search(r'maxrss_kb (\d+)', r.stderr).group(1))
    return dict(wall_s=round(wall, 1), extraction_s=ext, train_s=train, inside_s=inside, peak_rss_kb=rss)

def torch_capability()->str:
    return subprocess.run([sys.executable, '-c', 'import torch; print(torch.backends.cpu.get_cpu_capability())'],
                          capture_output=True, text=True).stdout.strip()

cpu = open('/proc/cpuinfo').read()
kind = re.search(r'model name\s*:\s*(.*)', cpu).group(1)
runs, bares = [], [bare()]
for _ in range(pairs): runs.append(ep_probe()); bares.append(bare())
for i, r in enumerate(runs): r['ratio'] = round(r['wall_s'] / ((bares[i] + bares[i + 1]) / 2), 2)
cap = torch_capability()
print(json.dumps(dict(command=' '.join(['python nbs/data/ep_probe/ratio.py', str(pairs), *flags]), isa=cap,
                      cpu=f"{kind}, {'with' if 'avx512_bf16' in cpu else 'without'} avx512_bf16",
                      bare_encoder_s=bares, ep_probe=runs,
                      median_ratio=statistics.median(r['ratio'] for r in runs)), indent=1))
