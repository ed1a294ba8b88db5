"""Helpers of tests/gpu_check.sh (issue 15): device facts, step records, the flag checker of the dry run, and the summary.
  python tests/gpu_check.py device  --out DIR           # DIR/device.json; exit 1 without a CUDA GPU
  python tests/gpu_check.py record  --out DIR --name N --command C --rc R --seconds S --log L   # add to DIR/steps.json
  python tests/gpu_check.py flags   --step NAME CMD [--step NAME CMD ...]   # each program exists and knows each --flag used
  python tests/gpu_check.py notebooks NB [NB ...]       # each notebook has a `#| cuda` cell
  python tests/gpu_check.py summary --out DIR           # DIR/summary.json and DIR/summary.md from what the steps left
  python tests/gpu_check.py selftest --steps A,B,...    # the record and summary writers on fake records in a temp dir"""
import argparse, json, os, re, shlex, shutil, subprocess, sys, tempfile
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CPU_ASSET = REPO/'ep_probing'/'assets'/'mae_fmnist_vit.json'     # provenance.epoch_seconds: the CPU pretraining figure

def _run(cmd, **kw):
    try: return subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop('timeout', 120), **kw)
    except (OSError, subprocess.TimeoutExpired) as e: return subprocess.CompletedProcess(cmd, 127, '', str(e))

def _version(mod):
    try: return __import__(mod).__version__
    except Exception as e: return f'not importable ({type(e).__name__})'

# ---- device.json
def _imports(mods=('ep_probing.cli', 'ep_probing.bench', 'ep_probing.mae', 'ep_probing.fit', 'ep_probing.viz', 'nbdev.test', 'execnb.shell')):
    "`{module: 'ok' or the error}`: what the later steps need, checked in a child process so a failure here stays readable"
    res = {}
    for m in mods:
        r = _run([sys.executable, '-c', f'import {m}'], cwd=REPO)
        res[m] = 'ok' if r.returncode == 0 else (r.stderr.strip().splitlines() or ['failed'])[-1][:300]
    return res

def device(out:Path)->int:
    import torch
    smi = _run(['nvidia-smi', '--query-gpu=name,memory.total,driver_version', '--format=csv'])
    cuda = torch.cuda.is_available()
    d = dict(date=datetime.now(timezone.utc).isoformat(timespec='seconds'), command=os.environ.get('GPU_CHECK_CMDLINE', ''),
             nvidia_smi=smi.stdout.strip() if smi.returncode == 0 else f'failed: {(smi.stderr or smi.stdout).strip()[:300]}',
             cuda_available=cuda, device_name=torch.cuda.get_device_name(0) if cuda else None,
             device_count=torch.cuda.device_count(), capability='.'.join(map(str, torch.cuda.get_device_capability(0))) if cuda else None,
             bf16_supported=torch.cuda.is_bf16_supported() if cuda else None,
             torch=torch.__version__, cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version() if cuda else None,
             nccl='.'.join(map(str, torch.cuda.nccl.version())) if cuda else None, python=sys.version.split()[0],
             timm=_version('timm'), fastai=_version('fastai'), fastcore=_version('fastcore'), accelerate=_version('accelerate'),
             nbdev=_version('nbdev'), ep_probing=_version('ep_probing'), cpu_count=os.cpu_count(), imports=_imports(),
             git_commit=_run(['git', '-C', str(REPO), 'rev-parse', 'HEAD']).stdout.strip() or None,
             git_dirty=bool(_run(['git', '-C', str(REPO), 'status', '--porcelain', '--untracked-files=no']).stdout.strip()))
    out.mkdir(parents=True, exist_ok=True)
    (out/'device.json').write_text(json.dumps(d, indent=1))
    print(json.dumps(d, indent=1))
    if not cuda: print('gpu_check: error: torch.cuda.is_available() is False: run this on a machine with a CUDA GPU', file=sys.stderr)
    return 0 if cuda else 1

# ---- steps.json
def record(out:Path, name, command, rc, seconds, log)->int:
    f = out/'steps.json'
    steps = [s for s in json.loads(f.read_text()) if s['name'] != name] if f.exists() else []   # a rerun replaces the step's record
    steps.append(dict(name=name, command=command, rc=int(rc), seconds=round(float(seconds), 2), log=str(log)))
    out.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(steps, indent=1))
    return 0

# ---- the dry run's flag checker
_WRAPPERS = {'time': 1, 'env': 1}                        # wrappers -> tokens they take (themselves included) before the command
_PY = re.compile(r'python(\d+(\.\d+)?)?$')

def simple_commands(cmd:str)->list:
    "The simple commands of a `&&`/`;`/`||`/`|` chain, as token lists, without env assignments and `time`/`env` wrappers"
    out, cur = [], []
    for t in shlex.split(cmd) + [';']:
        if t in ('&&', ';', '||', '|'):
            while cur and re.match(r'^[A-Za-z_]\w*=', cur[0]): cur = cur[1:]
            while cur and Path(cur[0]).name in _WRAPPERS:
                n = _WRAPPERS[Path(cur[0]).name]; cur = cur[1:]
                while cur and cur[0].startswith('-'): cur = cur[1:]  # the wrapper's own options (`time -v`)
                cur = cur[n - 1:]
            if cur: out.append(cur)
            cur = []
        else: cur.append(t)
    return out

def _long_flags(tokens): return [t.split('=')[0] for t in tokens if t.startswith('--') and len(t) > 2]

def help_targets(tokens:list)->list:
    "`[(help command, flags to find in its output)]` for one simple command"
    prog = tokens[0]
    if prog in ('cp', 'mkdir', 'tar', 'test', 'true'): return []
    if _PY.match(Path(prog).name):
        if tokens[1:3] == ['-m', 'pytest']:
            paths = [t for t in tokens[3:] if not t.startswith('-') and (REPO/t).exists()]
            return [([prog, '-m', 'pytest', *paths, '--help'], _long_flags(tokens[3:]))]
        return [([prog, tokens[1], '--help'], _long_flags(tokens[2:]))]
    if Path(prog).name == 'torchrun':
        i = next(j for j, t in enumerate(tokens[1:], 1) if not t.startswith('-'))   # the script after torchrun's own flags
        script = [tokens[i]] if {'--no-python', '--no_python'} & set(tokens[1:i]) else [sys.executable, tokens[i]]   # a program
        return [([prog, '--help'], _long_flags(tokens[1:i])), ([*script, '--help'], _long_flags(tokens[i+1:]))]
    return [([prog, '--help'], _long_flags(tokens[1:]))]

def check_flags(steps:list)->int:
    "Print one line per step: its programs exist and each `--flag` it uses appears in that program's `--help`"
    cache, bad = {}, 0
    for name, cmd in steps:
        problems, seen = [], []
        try: simple = simple_commands(cmd)
        except ValueError as e: simple, problems = [], [f'cannot parse the command ({e})']
        for tokens in simple:
            for hcmd, flags in help_targets(tokens):
                if not shutil.which(hcmd[0]) and not Path(hcmd[0]).exists(): problems.append(f'{hcmd[0]} is not on PATH'); continue
                key = ' '.join(hcmd)
                if key not in cache: cache[key] = _run(hcmd, cwd=REPO, timeout=300)
                r = cache[key]
                if r.returncode != 0: problems.append(f'`{key}` exits {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}'); continue
                text = r.stdout + r.stderr
                miss = [f for f in flags if not re.search(rf'(?<![\w-]){re.escape(f)}(?![\w-])', text)]
                problems += [f'{f} is not a flag of `{key}`' for f in miss]
                seen.append(f"{' '.join(hcmd[:-1])} ({len(flags)} flags)")
        bad += bool(problems)
        print(f"{'FAIL' if problems else 'ok  '} {name}: " + ('; '.join(problems) if problems else 'checked ' + ', '.join(seen) if seen else 'nothing to check'))
    return 1 if bad else 0

def notebooks(paths)->int:
    bad = 0
    for p in paths:
        try: cells = json.loads(Path(p).read_text())['cells']
        except (OSError, ValueError, KeyError) as e: print(f'FAIL {p}: cannot read the notebook ({e})'); bad += 1; continue
        n = sum(1 for c in cells if c.get('cell_type') == 'code' and re.search(r'^#\|\s*cuda\s*$', ''.join(c['source']), re.M))
        print(f"{'ok  ' if n else 'FAIL'} {p}: {n} `#| cuda` cell(s)"); bad += not n
    return 1 if bad else 0

# ---- summary
def _csv_rows(f:Path)->list:
    import csv
    return list(csv.DictReader(f.open())) if f.exists() else []

def _num(s):
    try: return float(s)
    except (TypeError, ValueError): return None

def _flag(cmd:str, flag:str, default):
    "The value of `flag` in a recorded command line (or `default`)"
    toks = shlex.split(cmd or '')
    return next((toks[i+1] for i, t in enumerate(toks[:-1]) if t == flag), default)

precision_runs = ('ep_probe', 'ep_probe_fp16', 'ep_probe_bf16')   # the default job: --precision auto, fp16, bf16

def _read(f)->str: return Path(f).read_text(errors='replace') if f and Path(f).is_file() else ''

def summary(out:Path)->dict:
    "Gather device, per-step seconds and status, ep_probe accuracies, streaming images/s and pretraining s/epoch into summary.json and .md"
    out = Path(out)
    steps = json.loads((out/'steps.json').read_text()) if (out/'steps.json').exists() else []
    dev = json.loads((out/'device.json').read_text()) if (out/'device.json').exists() else {}
    by = {s['name']: s for s in steps}
    s = dict(device=dev.get('device_name'), torch=dev.get('torch'), cuda=dev.get('cuda'), git_commit=dev.get('git_commit'), date=dev.get('date'),
             failed=[x['name'] for x in steps if x['rc'] != 0], steps={x['name']: dict(rc=x['rc'], seconds=x['seconds']) for x in steps})
    for run in ('ep_probe', 'ep_probe_stream', 'recipe_paper'):
        rows = _csv_rows(out/run/'results.csv')
        if rows: s[run] = dict(test_top1={r['probe']: _num(r.get('test_top1')) for r in rows}, train_s=_num(rows[0].get('train_s')),
                               step_seconds=by.get(run, {}).get('seconds'))
    for run in precision_runs:                      # issue 49: the default job in each precision, chosen and why
        m = re.search(r'\((\w+) extraction, (\w+) heads; ([^)]*)\)', _read(by.get(run, {}).get('log')))
        if m: s.setdefault('precision', {})[run] = dict(extraction=m[1], heads=m[2], why=m[3],
                                                         seconds=by[run]['seconds'], rc=by[run]['rc'])
    for run in ('ep_probe_stream', 'recipe_paper'):   # streamed runs: images through the encoder per second
        st = s.get(run)
        if not (st and st['train_s']): continue        # images seen in training: the train subset less the validation split
        cmd = by.get(run, {}).get('command', '')
        n = round(_num(_flag(cmd, '--train_size', 10000)) * (1 - _num(_flag(cmd, '--valid_pct', 0.1))))
        st.update(train_images=n, images_per_s=round(n / st['train_s'], 1),
                  note='train_s covers one epoch of training and its validation pass, so images/s is a lower bound')
    pj = out/'pretrain.json'
    if pj.exists():
        p = json.loads(pj.read_text())['provenance']; cpu = json.loads(CPU_ASSET.read_text())['provenance']
        n_gpu, n_cpu = int(p['data'].split(',')[1].split()[0]), int(cpu['data'].split(',')[1].split()[0])
        gpu_s, cpu_s = p['epoch_seconds'][-1], sorted(cpu['epoch_seconds'])[len(cpu['epoch_seconds']) // 2]
        s['pretrain'] = dict(gpu_epoch_seconds=p['epoch_seconds'], gpu_images=n_gpu, gpu_s_per_epoch_full=round(gpu_s * n_cpu / n_gpu, 2),
                             cpu_s_per_epoch_median=cpu_s, cpu_images=n_cpu, cpu_threads=cpu.get('threads'), speedup=round(cpu_s * n_gpu / (gpu_s * n_cpu), 1),
                             note='last GPU epoch (after warm-up; mixed precision: ep_pretrain --amp auto) scaled to the full train split; CPU: median fp32 epoch of the shipped asset')
    dj = out/'ddp'/'ddp.json'
    if dj.exists(): s['ddp'] = json.loads(dj.read_text())
    tj, sj = out/'times'/'times.json', out/'scale'/'scale.json'                 # issue 39: the default job's seconds, the scale
    if tj.exists(): s['times'] = json.loads(tj.read_text())['times']
    if sj.exists(): s['scale'] = json.loads(sj.read_text())['text']
    (out/'summary.json').write_text(json.dumps(s, indent=1))
    md = [f"# GPU check: {s['device']}", '', f"torch {s['torch']}, CUDA {s['cuda']}, commit {str(s['git_commit'])[:10]}, {s['date']}", '',
          '| step | rc | seconds |', '| --- | --- | --- |'] + [f"| {k} | {v['rc']} | {v['seconds']} |" for k, v in s['steps'].items()]
    if 'ep_probe' in s: md += ['', '| probe | test top-1 (%) |', '| --- | --- |'] + [f'| {k} | {100 * v:.2f} |' for k, v in s['ep_probe']['test_top1'].items() if v is not None]
    if 'precision' in s: md += ['', '| run | extraction | heads | why | seconds |', '| --- | --- | --- | --- | --- |'] + [
        f"| {k} | {v['extraction']} | {v['heads']} | {v['why']} | {v['seconds']} |" for k, v in s['precision'].items()]
    for run, what in (('ep_probe_stream', 'Streaming'), ('recipe_paper', 'One epoch of --recipe paper')):
        st = s.get(run) or {}
        if 'images_per_s' in st: md += ['', f"{what}: {st['images_per_s']} train images/s ({st['train_images']} images, {st['train_s']:.1f} s)."]
    if 'pretrain' in s: md += ['', f"ep_pretrain: {s['pretrain']['gpu_s_per_epoch_full']} s per full epoch on the GPU vs {s['pretrain']['cpu_s_per_epoch_median']} s on the CPU ({s['pretrain']['speedup']}x)."]
    if 'times' in s: md += ['', f"The default job: {s['times']['total_s']:.1f} s in all (target: 10 s); " + ', '.join(
        f"{k[:-2].replace('_', ' ')} {v:.1f} s" for k, v in s['times'].items() if k not in ('total_s', 'run_s')) + '.']
    if 'scale' in s: md += ['', '```', s['scale'], '```']
    md += ['', f"Failed steps: {', '.join(s['failed']) or 'none'}."]
    (out/'summary.md').write_text('\n'.join(md) + '\n')
    return s

def selftest(names)->int:
    "Run `record` and `summary` on fake step records in a temp dir; check what they write"
    with tempfile.TemporaryDirectory() as d:
        out = Path(d)
        for i, n in enumerate(names): record(out, n, f'fake {n} --flag', 0, 1.5 * i, out/'logs'/f'{n}.log')
        record(out, 'fake_failing_step', 'false', 1, 0.1, out/'logs'/'fake_failing_step.log')
        (out/'device.json').write_text(json.dumps(dict(device_name='FAKE (selftest)', torch='0', cuda='0', git_commit='0' * 40, date='now')))
        for run in ('ep_probe', 'ep_probe_stream'):
            (out/run).mkdir(); (out/run/'results.csv').write_text('probe,test_top1,train_s\nlp,0.5,10.0\nep,0.875,10.0\n')
        record(out, 'ep_probe_stream', 'ep_probe --stream --train_size 2000 --valid_pct 0.5', 0, 3, 'x')
        for run, p, why in (('ep_probe', 'bf16', 'NVIDIA H100: native bf16'), ('ep_probe_fp16', 'fp16', 'asked')):
            (out/'logs').mkdir(exist_ok=True); (out/'logs'/f'{run}.log').write_text(f"ep_probe: x; cached tokens ({p} "
                                                                                     f"extraction, {p} heads; {why}); 2 heads\n")
            record(out, run, f'ep_probe --precision {p}', 0, 7.5, out/'logs'/f'{run}.log')
        cpu = json.loads(CPU_ASSET.read_text())['provenance']
        (out/'pretrain.json').write_text(json.dumps(dict(provenance=dict(data='Fashion-MNIST train, 10000 images', epoch_seconds=[2.0, 1.0]))))
        s = summary(out)
        steps = json.loads((out/'steps.json').read_text())
        moved = ['ep_probe_stream', 'ep_probe', 'ep_probe_fp16']                     # recorded again: a rerun's place
        assert [x['name'] for x in steps] == [n for n in names if n not in moved] + ['fake_failing_step', *moved], steps
        assert s['failed'] == ['fake_failing_step'] and s['ep_probe']['test_top1'] == {'lp': 0.5, 'ep': 0.875}, s
        assert s['ep_probe_stream']['train_images'] == 1000 and s['ep_probe_stream']['images_per_s'] == 100.0, s['ep_probe_stream']
        cpu_s = sorted(cpu['epoch_seconds'])[len(cpu['epoch_seconds']) // 2]
        assert s['pretrain']['gpu_s_per_epoch_full'] == 6.0 and s['pretrain']['speedup'] == round(cpu_s / 6.0, 1), s['pretrain']
        assert s['precision'] == {'ep_probe': dict(extraction='bf16', heads='bf16', why='NVIDIA H100: native bf16',
                                                   seconds=7.5, rc=0),
                                  'ep_probe_fp16': dict(extraction='fp16', heads='fp16', why='asked', seconds=7.5, rc=0)}, s
        md = (out/'summary.md').read_text()
        assert '| ep_probe_fp16 | fp16 | fp16 | asked | 7.5 |' in md, md
        assert all(n in md for n in names) and '87.50' in md and 'FAKE' in md, md
    print(f'ok   report writer: steps.json, summary.json and summary.md from {len(names)} fake step records')
    return 0

if __name__ == '__main__':
    a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument('what', choices=['device', 'record', 'flags', 'notebooks', 'summary', 'selftest'])
    a.add_argument('paths', nargs='*', help='notebooks: the notebooks to look at')
    a.add_argument('--out', type=Path, help='the results folder')
    for f in ('--name', '--command', '--rc', '--seconds', '--log'): a.add_argument(f, help='record: the step\'s ' + f[2:])
    a.add_argument('--step', nargs=2, action='append', metavar=('NAME', 'CMD'), default=[], help='flags: a step and its command line')
    a.add_argument('--steps', default='', help='selftest: comma-separated step names')
    a = a.parse_args()
    if a.what == 'device': sys.exit(device(a.out))
    if a.what == 'record': sys.exit(record(a.out, a.name, a.command, a.rc, a.seconds, a.log))
    if a.what == 'flags': sys.exit(check_flags(a.step))
    if a.what == 'notebooks': sys.exit(notebooks(a.paths))
    if a.what == 'summary': print(json.dumps(summary(a.out), indent=1)); sys.exit(0)
    if a.what == 'selftest': sys.exit(selftest([n for n in a.steps.split(',') if n]))
