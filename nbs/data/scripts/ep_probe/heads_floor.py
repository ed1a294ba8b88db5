"""The floor under the default job's training: its heads' own arithmetic, timed alone, next to the bare encoder pass.
Builds the default job's 20 heads (lp, gap, ep, mhca, each over its learning-rate grid) and times one training step of
them together (forward, one backward of the summed loss, one AdamW step) on tokens already in the heads' dtype
(bf16 under autocast; fp32 for lp and gap),
at the default shapes: batch 256, 49 patch tokens and 1 prefix token of 192 channels. No data loading, no dtype
conversion, no validation, no callbacks. Then the floor of `ep_probe`'s 10 epochs: 2 epochs of all 20 heads and 8 of
the 12 that the halving keeps (3 per probe), 35 steps an epoch (9,000 training images, batch 256).
Usage (from the repository root): python nbs/data/scripts/ep_probe/heads_floor.py [steps=30]
Prints one line per head set and a JSON summary; run it beside `ratio.py` (same machine, same hour)."""
import json, re, sys, time, torch, torch.nn.functional as F
from ep_probing.specs import resolve_specs, build_heads

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
torch.manual_seed(0)
specs = resolve_specs('lp,gap,ep,mhca', [5], 6, blrs='default')    # as ep_probe resolves them
heads = build_heads(specs, 192, 10)
x32, p32, y = torch.randn(256, 49, 192), torch.randn(256, 1, 192), torch.randint(0, 10, (256,))
tok = {torch.float32: (x32, p32), torch.bfloat16: (x32.bfloat16(), p32.bfloat16())}

def step_ms(keys:list)->float:
    "ms of one training step of the heads `keys` together, as `ep_probe` takes it: one summed loss, one AdamW"
    opt = torch.optim.AdamW([dict(params=heads[k].parameters(), lr=1e-4) for k in keys])
    for k in keys: heads[k].train()
    def step():
        with torch.autocast('cpu', dtype=torch.bfloat16):
            loss = sum(F.cross_entropy(heads[k](*tok[torch.bfloat16 if heads[k].autocast_tokens else torch.float32]),
                                       y) for k in keys)
        loss.backward(); opt.step(); opt.zero_grad()
    for _ in range(3): step()
    t = time.perf_counter()
    for _ in range(steps): step()
    return (time.perf_counter() - t) / steps * 1e3

every = [s.key for s in specs]
kept = [k for g in dict.fromkeys(s.group or s.label for s in specs)
        for k in [s.key for s in specs if (s.group or s.label) == g][:3]]     # 3 of each probe's 5, as many as kept
ms20, ms12 = step_ms(every), step_ms(kept)
per = {s.group or s.label: round(step_ms([s.key]), 2) for s in specs if s.key in kept[::3]}
floor = (2 * ms20 + 8 * ms12) * 35 / 1e3
print(f"one step of the 20 heads: {ms20:.1f} ms; of 12 heads: {ms12:.1f} ms; one head each: {per}")
print(f"floor of the default job's training (2 x 35 steps of 20 heads, 8 x 35 of 12): {floor:.1f} s")
cpu = open('/proc/cpuinfo').read()
kind = re.search(r'model name\s*:\s*(.*)', cpu).group(1)
amx = 'amx_bf16' in cpu
print(json.dumps(dict(command=' '.join(['python nbs/data/scripts/ep_probe/heads_floor.py', *sys.argv[1:]]),
                      cpu=f"{kind}, {'with' if 'avx512_bf16' in cpu else 'without'} avx512_bf16"
                          f"{', with AMX' if amx else ''}", isa=torch.backends.cpu.get_cpu_capability(),
                      step_ms_20_heads=round(ms20, 2), step_ms_12_heads=round(ms12, 2), step_ms_one_head=per,
                      training_floor_s=round(floor, 1)), indent=1))
