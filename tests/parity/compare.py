"""Our zoo against the paper's own pooling code, in float64, weights copied both ways.

Usage (from the repository root, with `PYTHONPATH=$PWD`):
    python tests/parity/compare.py PAPER [--out nbs/data/parity/parity_after.csv] [--dim 768] [--num_tokens 196]
PAPER is a checkout of github:billpsomas/efficient-probing (its files are imported from there at run time, never
copied into this project). For each of its 14 poolings, built as its `probe_heads.POOLINGS` builds them with its
command-line defaults, and our probe of the same name:
  paper->ours  the paper module at its initialisation, copied into ours;
  ours->paper  ours with every parameter perturbed (so that zero or unit inits hide nothing), copied into theirs;
each on unit-variance patch tokens `(B, N, C)` and, except the grid pools, on `[CLS; patches]` (the `_all`
variants). Both sides are whole heads (pool, `BatchNorm1d(affine=False)`, `Linear`) in training mode; a
cross-entropy loss is backpropagated. Per pooling the worst case over directions and token sets of max|delta|
(absolute, and relative to max|paper|) of the pooled output, the logits, the gradient w.r.t. the tokens and the
gradient w.r.t. every parameter (the worst one named; relative to at least 1e-6 of the largest parameter gradient,
so that gradients which are zero in exact arithmetic, such as a softmax's shift, count as zero), and for pools
with a learned query the ratio ||grad ours|| / ||grad paper|| of the query at the paper's initialisation.
Writes a CSV; prints it."""
import argparse, contextlib, csv, re, sys, types, warnings
from pathlib import Path
import torch, torch.nn as nn, torch.nn.functional as F
from ep_probing.probes import create_probe
from ep_probing.zoo import zoo_kwargs

GRID = ('clip', 'dolg', 'cbam')
# paper parameter name -> ours (regex substitutions applied in order)
RENAME = dict(
    abmilp=[(r'^self_attn\.', 'attn.'), (r'^attention_predictor\.0\.', 'score.fc1.'),
            (r'^attention_predictor\.2\.', 'score.fc2.')],
    simpool=[(r'^norm_patches\.', 'norm.'), (r'^wq\.', 'q.'), (r'^wk\.', 'k.')],
    esimpool=[(r'^norm_patches\.', 'norm.')],
    clip=[(r'^(pos_embed|qkv|proj)', r'attn_pool.\1')],
    siglip=[],
    aim=[(r'^cls_token$', 'query'), (r'^bn\.', 'norm.')],
    ep=[(r'^cls_token$', 'query')],
    cbam=[(r'^', 'cbam.')],
    coca=[(r'^img_queries$', 'query'), (r'^norm\.gamma$', 'norm.weight'), (r'^to_q\.', 'q.'), (r'^to_kv\.', 'kv.'),
          (r'^to_out\.', 'proj.')],
    cait=[(r'^blocks_token_only\.0\.', 'block.')],
    dinovit=[(r'^dino_block\.', 'block.')],
    jepa=[(r'^query_tokens$', 'query'), (r'^cross_attention_block\.(xattn\.)?', '')],
    dolg=[(r'^conv1\.', 'conv.'), (r'^conv2\.', 'score.')],
    cae=[(r'^query_token$', 'query'), (r'^norm1_([qkv])\.', r'norm_\1.'), (r'^norm2_cross\.', 'unused_norm.'),
         (r'^cross_attn\.', '')],
)
QUERY = dict(siglip='latent', aim='query', ep='query', coca='query', cait='cls_token', jepa='query', cae='query')


def rename(name:str, pool:str)->str:
    "Our name for the paper's parameter or buffer `name` of pooling `pool`"
    for a, b in RENAME[pool]: name = re.sub(a, b, name)
    return name


@contextlib.contextmanager
def cpu_tensors():
    "The paper's SimPool builds an unused `torch.tensor(..., device='cuda')`: build it on the CPU instead"
    orig = torch.tensor
    def tensor(*a, **k): return orig(*a, **{**k, 'device': 'cpu'} if k.get('device') == 'cuda' else k)
    torch.tensor = tensor
    try: yield
    finally: torch.tensor = orig


def einops_stand_in():
    "The three `einops` patterns the paper's CoCa pooler uses, if `einops` is not installed (it is not a dependency)"
    def rearrange(t, pattern, **k):
        if pattern == 'b n (h d) -> b h n d': return t.unflatten(-1, (k['h'], -1)).transpose(1, 2)
        if pattern == 'b h n d -> b n (h d)': return t.transpose(1, 2).flatten(2)
        raise NotImplementedError(pattern)
    def repeat(t, pattern, **k):
        if pattern == 'n d -> b n d': return t.expand(k['b'], -1, -1)
        raise NotImplementedError(pattern)
    return types.SimpleNamespace(rearrange=rearrange, repeat=repeat)


def paper_poolings(path:Path):
    "The paper's `POOLINGS` table (name -> (factory, classifier factory)), imported from the checkout at `path`"
    sys.path.insert(0, str(path))
    try: import einops  # noqa: F401 (only checks that it is there)
    except ImportError: sys.modules['einops'] = einops_stand_in()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        import probe_heads
    return probe_heads.POOLINGS


def paper_args(num_tokens:int):
    "The paper's `main_linprobe.py` defaults for the options its pooling factories read"
    args = types.SimpleNamespace(abmilp_sa='both', abmilp_act='tanh', abmilp_depth=2, abmilp_cond=None,
                                 abmilp_content='all', num_heads=16, ep_queries=32, d_out=1, model='vit')
    return args, types.SimpleNamespace(patch_embed=types.SimpleNamespace(num_patches=num_tokens))


def heads(name:str, poolings, dim:int, num_tokens:int, num_classes:int, tokens:str):
    "`(paper head, our probe)`, the paper's as `build_probe_head` builds it, both float64 and in training mode"
    torch.manual_seed(0)
    with cpu_tensors(): pool = poolings[name][0](dim, *paper_args(num_tokens))
    theirs = nn.Sequential(pool, nn.BatchNorm1d(dim, affine=False, eps=1e-6), nn.Linear(dim, num_classes))
    ours = create_probe(name if tokens == 'patch' else f'{name}_all', dim, num_classes,
                        **zoo_kwargs(name, num_tokens))
    return theirs.double().train(), ours.double().train()


def pairs(name:str, theirs:nn.Module, ours:nn.Module):
    "`(paper name, our name)` of every parameter and buffer; `ValueError` if a parameter has no counterpart"
    mine = dict(ours.named_parameters()) | dict(ours.named_buffers())
    out = []
    for n, t in list(theirs.named_parameters()) + list(theirs.named_buffers()):
        m = 'head.' + n[2:] if n.startswith('2.') else 'pool.' + rename(n[2:], name) if n.startswith('0.') else None
        if m in mine and mine[m].numel() == t.numel(): out.append((n, m))
        elif isinstance(t, nn.Parameter) or n.startswith('2.'): raise ValueError(f"{name}: no counterpart for {n}")
    theirs_p = {n for n, _ in theirs.named_parameters()}
    left = set(dict(ours.named_parameters())) - {m for n, m in out if n in theirs_p}
    if left - {'pool.unused_norm.weight', 'pool.unused_norm.bias'}: raise ValueError(f"{name}: unmatched {left}")
    return out


@torch.no_grad()
def copy(src:nn.Module, dst:nn.Module, names:list):
    "Copy every tensor of `src` into `dst` along `names` (`(src name, dst name)`), reshaped"
    s, d = src.state_dict(), dst.state_dict()
    for a, b in names: d[b].copy_(s[a].reshape(d[b].shape))


@torch.no_grad()
def perturb(m:nn.Module, seed:int=1):
    "Add noise to every parameter, so that zero or unit initialisations hide no difference"
    g = torch.Generator().manual_seed(seed)
    for p in m.parameters(): p.add_(0.05 * torch.randn(p.shape, generator=g, dtype=p.dtype))


def run(model:nn.Module, x:torch.Tensor, y:torch.Tensor, paper:bool, prefix=None):
    "Pooled output, logits, grad w.r.t. the tokens and every parameter's grad"
    model.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(True)
    if paper: pooled = model[0](x if prefix is None else torch.cat([prefix, x], 1)); logits = model[2](model[1](pooled))
    else: sel = model.select(x, prefix); pooled = model.pool(sel); logits = model.head(model.norm(pooled))
    F.cross_entropy(logits, y).backward()
    return dict(out=pooled.detach(), logits=logits.detach(), grad_x=x.grad,
                grads={n: p.grad for n, p in model.named_parameters()})


def delta(a:torch.Tensor, b:torch.Tensor, scale:float=0.):
    "`(max|a - b|, max|a - b| / max(max|b|, scale))`: `scale` keeps gradients that are zero in exact arithmetic at 0"
    if a is None and b is None: return 0., 0.
    a, b = (torch.zeros_like(b) if a is None else a), (torch.zeros_like(a) if b is None else b)
    d = (a.reshape(b.shape) - b).abs().max().item(); s = max(b.abs().max().item(), scale)
    return d, (d / s if s else (0. if d == 0 else float('inf')))


def compare(name:str, poolings, dim:int, num_tokens:int, num_classes:int=10, batch:int=4)->dict:
    "The worst differences between the paper's `name` and ours (see the module docstring)"
    row, worst = dict(pooling=name), {}
    for tokens in (('patch',) if name in GRID else ('patch', 'all')):
        for direction in ('paper->ours', 'ours->paper'):
            theirs, ours = heads(name, poolings, dim, num_tokens, num_classes, tokens)
            names = pairs(name, theirs, ours)
            if direction == 'paper->ours': copy(theirs, ours, names)
            else: perturb(ours); copy(ours, theirs, [(b, a) for a, b in names])
            g = torch.Generator().manual_seed(2)
            x = torch.randn(batch, num_tokens, dim, generator=g, dtype=torch.float64)
            prefix = torch.randn(batch, 1, dim, generator=g, dtype=torch.float64) if tokens == 'all' else None
            y = torch.randint(num_classes, (batch,), generator=g)
            p, o = run(theirs, x, y, True, prefix), run(ours, x, y, False, prefix)
            cases = {k: delta(o[k], p[k]) for k in ('out', 'logits', 'grad_x')}
            scale = 1e-6 * max(g.abs().max().item() for g in p['grads'].values() if g is not None)
            for a, b in names:
                if a in p['grads']: cases[f'grad:{b}'] = delta(o['grads'][b], p['grads'][a], scale)
            for k, v in cases.items():
                key = 'grad_params' if k.startswith('grad:') else k
                if key not in worst or v[1] > worst[key][0][1]: worst[key] = (v, k[5:] if key == 'grad_params' else '')
            if direction == 'paper->ours' and tokens == 'patch' and name in QUERY:
                q = f'pool.{QUERY[name]}'; a = next(a for a, b in names if b == q)
                row['query_grad_ratio_at_init'] = f"{(o['grads'][q].norm() / p['grads'][a].norm()).item():.4g}"
    for k in ('out', 'logits', 'grad_x', 'grad_params'):
        (d, r), what = worst[k]
        row[f'{k}_abs'], row[f'{k}_rel'] = f'{d:.3g}', f'{r:.3g}'
        if k == 'grad_params': row['worst_param'] = what.removeprefix('pool.')
    row.setdefault('query_grad_ratio_at_init', '')
    return row


def timm_rows(paper_poolings, dim:int, num_tokens:int, batch:int=4)->list:
    "Our `siglip` and `simpool` and the paper's against timm's `AttentionPoolLatent` and `SimPool1d`, weights shared"
    from functools import partial
    from timm.layers import AttentionPoolLatent, SimPool1d
    def pool(name, **kw): torch.manual_seed(0); return create_probe(name, dim, 10, **kw).pool.double()
    def paper(name):
        torch.manual_seed(0)
        with cpu_tensors(): return paper_poolings[name][0](dim, *paper_args(num_tokens)).double()
    def timm_map(): return AttentionPoolLatent(dim, num_heads=8, qkv_bias=True, norm_layer=None).double()
    cases = [('siglip (pool-first)', pool('siglip'), 'timm AttentionPoolLatent', timm_map(), []),
             ('siglip, timm order', pool('siglip', pool_first=False), 'timm AttentionPoolLatent', timm_map(), []),
             ('paper siglip', paper('siglip'), 'timm AttentionPoolLatent', timm_map(), []),
             ('simpool', pool('simpool'), 'timm SimPool1d (its default LayerNorm, eps 1e-5)', SimPool1d(dim).double(),
              []),
             ('simpool', pool('simpool'), 'timm SimPool1d(norm_layer=LayerNorm eps 1e-6)',
              SimPool1d(dim, norm_layer=partial(nn.LayerNorm, eps=1e-6)).double(), []),
             ('paper simpool', paper('simpool'), 'timm SimPool1d (its default LayerNorm, eps 1e-5)',
              SimPool1d(dim).double(), RENAME['simpool'])]
    g = torch.Generator().manual_seed(2)
    x = torch.randn(batch, num_tokens, dim, generator=g, dtype=torch.float64)
    w = torch.randn(batch, dim, generator=g, dtype=torch.float64)
    rows = []
    for a_name, a, b_name, b, ren in cases:
        perturb(a)
        names = []
        for n, _ in a.named_parameters():
            m = n
            for p, r in ren: m = re.sub(p, r, m)
            names.append((n, m))
        copy(a, b, names)
        res = []
        for m in (a, b):
            xx = x.clone().requires_grad_(True); y = m(xx); (y * w).sum().backward()
            res.append((y.detach(), xx.grad, {n: t.grad for n, t in m.named_parameters()}))
        gp = max(delta(res[0][2][n], res[1][2][m])[1] for n, m in names)
        rows.append(dict(ours=a_name, reference=b_name, out_rel=f'{delta(res[0][0], res[1][0])[1]:.3g}',
                         grad_x_rel=f'{delta(res[0][1], res[1][1])[1]:.3g}', grad_params_rel=f'{gp:.3g}'))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('paper', type=Path, help='a checkout of github:billpsomas/efficient-probing')
    ap.add_argument('--out', type=Path, help='CSV to write')
    ap.add_argument('--dim', type=int, default=768)
    ap.add_argument('--num_tokens', type=int, default=196)
    ap.add_argument('--only', help='comma-separated pooling names (default: all 14)')
    ap.add_argument('--timm_out', type=Path, help="CSV of the comparison with timm's own pools (siglip, simpool)")
    a = ap.parse_args(argv)
    if not (a.paper/'probe_heads.py').is_file():
        ap.error(f"{a.paper} has no probe_heads.py; pass a checkout of github:billpsomas/efficient-probing")
    poolings = paper_poolings(a.paper.resolve())
    if a.timm_out: write(timm_rows(poolings, a.dim, a.num_tokens), a.timm_out)
    write([compare(n, poolings, a.dim, a.num_tokens) for n in (a.only.split(',') if a.only else poolings)], a.out)


def write(rows:list, path:Path=None):
    "Print `rows` as CSV, and write them to `path`"
    w = csv.DictWriter(sys.stdout, list(rows[0])); w.writeheader(); w.writerows(rows)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, 'w', newline='') as f: w = csv.DictWriter(f, list(rows[0])); w.writeheader(); w.writerows(rows)


if __name__ == '__main__': main()
