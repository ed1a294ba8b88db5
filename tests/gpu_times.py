"""The default job's seconds taken apart (GPU check step ep_probe_times; on the CPU with --device cpu): the interpreter,
the command's start-up, imports (and, from `python -X importtime`, which packages they go to), CUDA initialisation,
building the encoder, loading and splitting the data, building and dry-running the heads, extraction, cache
verification, training, test evaluation, the figure and meta.json, writing the results, the bootstrap, and the rest.
  python tests/gpu_times.py OUT [--device cuda] [--train_size N --test_size N --epochs N --probes P --cache_dir D]
Each stage is timed from the outside by wrapping the library function that does it (nothing in the package changes),
exclusive of the stages inside it (cache verification runs inside extraction, test evaluation and the figure inside
training). Writes OUT/times.json and prints a table."""
import argparse, json, os, re, subprocess, sys, time
from pathlib import Path

t_start = time.perf_counter()
stages = ('encoder_s', 'data_s', 'heads_s', 'extraction_s', 'verification_s', 'training_s', 'test_eval_s',
          'figure_meta_s', 'publish_s', 'bootstrap_s')

def cpu_name()->str:
    "The CPU's model name (`/proc/cpuinfo`), beside every time"
    try: return next(l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo') if l.startswith('model name'))
    except (OSError, StopIteration): return '?'

def import_times(module:str='ep_probing.pipeline')->dict:
    "Seconds of `import module` in a fresh interpreter (`python -X importtime`), by top-level package, largest first"
    r = subprocess.run([sys.executable, '-X', 'importtime', '-c', f'import {module}'], capture_output=True, text=True)
    own = {}
    for m in re.finditer(r'import time:\s+(\d+) \|\s+\d+ \| *([\w.]+)', r.stderr):   # self time, microseconds
        top = m[2].split('.')[0]; own[top] = own.get(top, 0) + int(m[1]) / 1e6
    return dict(sorted(((k, round(v, 3)) for k, v in own.items() if v >= 0.02), key=lambda kv: -kv[1]))

def main(a)->dict:
    times = {}
    t = time.perf_counter()                                              # a bare interpreter's start and exit
    subprocess.run([sys.executable, '-c', 'pass'], check=True)
    times['interpreter_s'] = time.perf_counter() - t
    t = time.perf_counter()                                              # the command line: parsed without torch
    r = subprocess.run(['ep_probe', '--help'], capture_output=True, text=True)
    if r.returncode: raise SystemExit(f'gpu_times.py: ep_probe --help failed: {r.stderr[-500:]}')
    times['startup_s'] = time.perf_counter() - t
    t = time.perf_counter()
    import torch, ep_probing.pipeline as pl, ep_probing.prepare as pr, ep_probing.cache as ca, ep_probing.fit as fi
    from ep_probing.run_folder import RunFolder
    times['import_s'] = time.perf_counter() - t
    t = time.perf_counter()
    if a.device.startswith('cuda'): torch.zeros(1, device=a.device).sum().item(); torch.cuda.synchronize()
    times['cuda_init_s'] = time.perf_counter() - t
    acc, stack = {k: 0. for k in stages}, []
    def timed(mod, name, key):                                          # exclusive times: a stage inside another
        f = getattr(mod, name)                                          # (verification in extraction, the figure in
        def g(*args, **kw):                                             # training) is taken out of the outer one
            t = time.perf_counter(); stack.append(key)
            try: return f(*args, **kw)
            finally:
                if a.device.startswith('cuda'): torch.cuda.synchronize()
                dt = time.perf_counter() - t; stack.pop(); acc[key] += dt
                if stack: acc[stack[-1]] -= dt
        setattr(mod, name, g)
    for mod, name, key in ((pr, '_encoder', 'encoder_s'), (pr, 'load_data', 'data_s'), (pr, 'split_rows', 'data_s'),
                           (pr.Prepared, 'heads', 'heads_s'), (pr, 'cache_dls', 'extraction_s'),
                           (ca, 'cache_damage', 'verification_s'), (pl, 'fit_probes', 'training_s'),
                           (fi, 'evaluate_probes', 'test_eval_s'), (pl, '_write_meta', 'figure_meta_s'),
                           (RunFolder, 'publish', 'publish_s'), (pl, 'vs_best', 'bootstrap_s')):
        timed(mod, name, key)
    t = time.perf_counter()
    opts = dict(train_size=a.train_size, test_size=a.test_size, device=a.device, out=a.out + '/run',
                **({'epochs': a.epochs} if a.epochs else {}), **({'cache_dir': a.cache_dir} if a.cache_dir else {}))
    run = pl.run_probing(probes=a.probes, progress=False, **opts)
    table = pl.report(run, run.prepared.cfg)
    times['run_s'] = time.perf_counter() - t
    times.update(acc)
    times['rest_s'] = times['run_s'] - sum(acc.values())                 # config, run folder, selection, the table
    times['total_s'] = time.perf_counter() - t_start + times['startup_s']
    imports = import_times() if a.imports else {}
    rec = dict(times={k: round(v, 3) for k, v in times.items()}, device=a.device, options=opts, probes=a.probes,
               imports=imports, cpu=cpu_name(),
               threads=torch.get_num_threads(), load_average=os.getloadavg(),
               device_name=torch.cuda.get_device_name(a.device) if a.device.startswith('cuda') else 'cpu',
               note='interpreter_s: `python -c pass`; startup_s: `ep_probe --help` in its own process (the command '
                    'line without torch); total_s: this process from its start plus that start-up; imports: self '
                    'seconds of `import ep_probing.pipeline` by top-level package in a fresh interpreter '
                    '(python -X importtime)', report=table)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out)/'times.json').write_text(json.dumps(rec, indent=1) + '\n')
    for k, v in rec['times'].items(): print(f'{k:>16} {v:8.2f}')
    if imports: print('imports (python -X importtime, s):', ', '.join(f'{k} {v:.2f}' for k, v in imports.items()))
    return rec

if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('out', help='the results folder (times.json; the run in OUT/run)')
    p.add_argument('--device', default='cuda')
    p.add_argument('--train_size', type=int, default=0)
    p.add_argument('--test_size', type=int, default=0)
    p.add_argument('--epochs', type=int, default=0, help='0: the default')
    p.add_argument('--probes', default='lp,gap,ep,mhca')
    p.add_argument('--cache_dir', default=None)
    p.add_argument('--imports', action='store_true', help='also take the imports apart by package (a fresh process)')
    os.environ.setdefault('MPLBACKEND', 'Agg')
    main(p.parse_args())
