"""The default grid's training step, eager against a fused optimiser, `torch.compile` and CUDA graphs (GPU check step
head_compile; it runs on the CPU too, small, as the test suite runs it).
  python tests/gpu_step.py OUT [--device cuda] [--modes eager,fused,compile,graphs] [--steps N --warmup N --bs B]
One step of the default job's training on cached tokens: the 20 heads of `lp,gap,ep,mhca` (each probe over its default
learning-rate grid) on one batch of fp16 tokens of the embedded encoder's shape (49 patch + 1 prefix tokens of width
192, 10 classes), forward under bf16 autocast, the summed loss, backward, AdamW (one parameter group per head), as
`fit_probes` does it without fastai's callbacks around it. Modes: eager (torch.optim.AdamW, foreach), fused (AdamW
fused=True), compile (`torch.compile(model)`, fused AdamW), graphs (`torch.compile(model, mode='reduce-overhead')`: CUDA
graphs, CUDA only). Each mode starts from the same seeded heads and batches; its losses after the timed steps are
compared with eager's. Writes OUT/step.json and prints ms per step, the first calls' seconds (compilation) and the
ratio to eager."""
import argparse, json, os, time
from pathlib import Path
import torch

def build(a, fused:bool):
    "The default grid's ProbeSet and its AdamW, seeded: the same heads in every mode"
    from ep_probing.specs import resolve_specs, build_heads
    from ep_probing.fit import ProbeSet
    specs = resolve_specs(a.probes, [5], 6, prefix=True, blrs='default', batch=a.bs)
    torch.manual_seed(0)
    heads = build_heads(specs, a.dim, a.classes)
    model = ProbeSet(heads, {s.key: s.layer for s in specs}, layer_order=[5], specs=specs).to(a.device)
    groups = [dict(params=list(p.parameters()), lr=s.peak_lr) for s, p in zip(specs, model.probes.values())]
    opt = torch.optim.AdamW(groups, weight_decay=0.05, **(dict(fused=True) if fused else dict(foreach=True)))
    return model, opt, len(specs)

def batches(a, n:int)->list:
    "`n` seeded batches of fp16 tokens `(B, 1, N, C)`, `(B, 1, 1, C)` and labels, on the device"
    g = torch.Generator().manual_seed(1)
    mk = lambda *s: torch.randn(*s, generator=g).half().to(a.device)
    return [(mk(a.bs, 1, a.tokens, a.dim), mk(a.bs, 1, 1, a.dim), torch.randint(0, a.classes, (a.bs,), generator=g)
             .to(a.device)) for _ in range(n)]

def sync(a):
    if a.device.startswith('cuda'): torch.cuda.synchronize()

def run_mode(a, mode:str, data:list)->dict:
    "ms per step of `mode` over `data` after its warm-up, the warm-up's seconds, and the last losses"
    from ep_probing.fit import probes_loss
    model, opt, heads = build(a, fused=mode != 'eager')
    fwd = (torch.compile(model) if mode == 'compile' else
           torch.compile(model, mode='reduce-overhead') if mode == 'graphs' else model)
    dev = a.device.split(':')[0]
    def step(patch, prefix, y):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=a.precision == 'bf16'):
            loss = probes_loss(fwd(patch, prefix), y)
        loss.backward(); opt.step()
        return loss.detach()
    t = time.perf_counter()
    for b in data[:a.warmup]: step(*b)
    sync(a); warm = time.perf_counter() - t
    t, losses = time.perf_counter(), []
    for b in data[a.warmup:]: losses.append(step(*b))
    sync(a); secs = time.perf_counter() - t
    return dict(mode=mode, heads=heads, ms_per_step=1e3 * secs / (len(data) - a.warmup), warmup_s=warm,
                losses=[float(l) for l in losses[-3:]])

def main(a)->dict:
    modes = [m.strip() for m in a.modes.split(',')]
    bad = [m for m in modes if m not in ('eager', 'fused', 'compile', 'graphs')]
    if bad: raise SystemExit(f"gpu_step.py: error: --modes {','.join(bad)}: use eager, fused, compile, graphs")
    if 'graphs' in modes and not a.device.startswith('cuda'):
        raise SystemExit("gpu_step.py: error: --modes graphs needs --device cuda (CUDA graphs)")
    data = batches(a, a.warmup + a.steps)
    rows = [run_mode(a, m, data) for m in modes]
    base = next((r for r in rows if r['mode'] == 'eager'), rows[0])
    for r in rows:
        r['speedup_vs_' + base['mode']] = base['ms_per_step'] / r['ms_per_step']
        r['loss_rel_diff'] = max(abs(x - y) / abs(y) for x, y in zip(r['losses'], base['losses']))
    rec = dict(rows=rows, device=a.device, precision=a.precision, bs=a.bs, tokens=a.tokens, dim=a.dim,
               classes=a.classes, probes=a.probes, steps=a.steps, warmup=a.warmup, torch=torch.__version__,
               device_name=torch.cuda.get_device_name(a.device) if a.device.startswith('cuda') else 'cpu',
               threads=torch.get_num_threads(), load_average=os.getloadavg())
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out)/'step.json').write_text(json.dumps(rec, indent=1) + '\n')
    for r in rows:
        print(f"{r['mode']:>8}: {r['ms_per_step']:8.2f} ms/step ({r['heads']} heads), first {a.warmup} steps "
              f"{r['warmup_s']:.2f} s, x{r['speedup_vs_' + base['mode']]:.2f} vs {base['mode']}, "
              f"loss rel. diff {r['loss_rel_diff']:.1e}")
    return rec

if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('out', help='the results folder (step.json)')
    p.add_argument('--device', default='cuda')
    p.add_argument('--modes', default='eager,fused,compile,graphs', help='eager, fused, compile, graphs (CUDA only)')
    p.add_argument('--steps', type=int, default=100, help='timed steps')
    p.add_argument('--warmup', type=int, default=10, help='steps before timing (compilation happens there)')
    p.add_argument('--bs', type=int, default=256)
    p.add_argument('--tokens', type=int, default=49, help='patch tokens N')
    p.add_argument('--dim', type=int, default=192, help='token width C')
    p.add_argument('--classes', type=int, default=10)
    p.add_argument('--probes', default='lp,gap,ep,mhca')
    p.add_argument('--precision', default='bf16', choices=('bf16', 'none'))
    main(p.parse_args())
