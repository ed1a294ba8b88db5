"""The default `ep_probe` job against its one unavoidable cost, side by side: bare encoder pass, ep_probe with an empty
cache, bare pass again, ... (`pairs` ep_probe runs, each between two bare passes). Prints one line per run and a JSON
summary: every ep_probe wall time over the mean of the bare passes just before and after it, and the median ratio.
Usage (from the repository root):
  python nbs/data/scripts/ep_probe/ratio.py [pairs=3] [--bare_bs 256[,64]] [ep_probe flags...]
`--bare_bs 256,64` times the bare pass at each batch in turn (the issue's 256; `ep_probe` extracts in batches of 64)
and gives each run's ratio to each. The ISA limits in the environment (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA,
MKL_ENABLE_INSTRUCTIONS, e.g. all three at AVX2 to run as a CPU without AVX-512) reach both and are recorded.
With `--precision none` (or `--fp32`) the bare passes run in fp32 too. With `--out DIR` among the flags, the last
run's output stays in DIR (each run writes there in turn)."""
import json, os, re, subprocess, sys, tempfile, time, statistics
from pathlib import Path

here = Path(__file__).parent
pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
flags = sys.argv[2:]
bare_bs = ['256']
if '--bare_bs' in flags:
    i = flags.index('--bare_bs'); bare_bs = flags[i + 1].split(','); del flags[i:i + 2]
isa_env = {k: os.environ[k] for k in ('ATEN_CPU_CAPABILITY', 'ONEDNN_MAX_CPU_ISA', 'MKL_ENABLE_INSTRUCTIONS')
           if k in os.environ}
fp32 = '--fp32' in flags or ('--precision' in flags and flags[flags.index('--precision') + 1] == 'none')
prec = 'none' if fp32 else 'bf16'                      # the bare pass in the precision ep_probe extracts in

def bare_at(bs:str)->float:
    out = subprocess.run([sys.executable, str(here/'bare_encoder.py'), prec, bs], capture_output=True, text=True,
                         check=True).stdout
    s = float(re.search(r'in ([\d.]+) s', out).group(1)); print(out.strip(), flush=True); return s

def bare()->dict: return {bs: bare_at(bs) for bs in bare_bs}

def ep_probe()->dict:
    with tempfile.TemporaryDirectory() as d:
        out = [] if '--out' in flags else ['--out', f'{d}/out']
        t = time.perf_counter()
        r = subprocess.run(['/usr/bin/time', '-f', 'maxrss_kb %M', 'ep_probe', *out, '--cache_dir', f'{d}/cache',
                            *flags],
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
for i, r in enumerate(runs):
    r['ratio'] = {bs: round(r['wall_s'] / ((bares[i][bs] + bares[i + 1][bs]) / 2), 2) for bs in bare_bs}
cap = torch_capability()
env = ' '.join(f"{k}={v}" for k, v in isa_env.items())
cmd = ' '.join([*([env] if env else []), 'python nbs/data/scripts/ep_probe/ratio.py', str(pairs), *sys.argv[2:]])
print(json.dumps(dict(command=cmd, isa=cap,
                      cpu=f"{kind}, {'with' if 'avx512_bf16' in cpu else 'without'} avx512_bf16",
                      bare_encoder_s={bs: [b[bs] for b in bares] for bs in bare_bs}, ep_probe=runs,
                      median_ratio={bs: statistics.median(r['ratio'][bs] for r in runs) for bs in bare_bs}), indent=1))
