"""Parity with the paper's pooling code, pinned offline: each pool whose LayerNorm epsilon differed from the paper's
code is checked against a from-scratch float64 computation with the paper's epsilon (the comparison with the paper's
own modules is tests/parity/compare.py; its table is nbs/data/parity/). With the old epsilons these tests fail."""
import math, pytest, torch, torch.nn as nn
from ep_probing.probes import create_probe
from ep_probing.zoo import zoo_kwargs

C, N, B = 48, 16, 3  # C divisible by every default head count


def ln(x, w, b, eps):
    "LayerNorm over the last axis, written out: `(x - mean) / sqrt(biased var + eps) * w + b`"
    m = x.mean(-1, keepdim=True); v = ((x - m) ** 2).mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(v + eps) * w + b


def heads(t, h): return t.reshape(*t.shape[:-1], h, -1).transpose(-3, -2)         # (B, L, C) -> (B, h, L, d)
def merge(o): return o.transpose(-3, -2).flatten(-2)                             # (B, h, L, d) -> (B, L, C)
def attend(q, k, v): return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v


@torch.no_grad()
def pool_of(name, **kw):
    "Our pool `name` in float64, every parameter moved away from its init (LayerNorm weights near 1)"
    torch.manual_seed(0)
    p = create_probe(name, C, 5, **zoo_kwargs(name, N), **kw).pool.double()
    for n, t in p.named_parameters(): t.copy_(1 + 0.1 * torch.randn_like(t) if 'norm' in n and n.endswith('weight')
                                              else t + 0.1 * torch.randn_like(t))
    return p


def tokens(seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, N, C, generator=g, dtype=torch.float64)


def close(a, b, rtol=1e-10): torch.testing.assert_close(a, b, rtol=rtol, atol=rtol * b.abs().max().item())


def test_layernorm_eps_as_paper():
    "Every LayerNorm of the zoo has the epsilon of the paper's code"
    want = dict(simpool={1e-6}, esimpool={1e-6}, clip={1e-6}, cait={1e-6, 1e-5}, dinovit={1e-5}, cae={1e-5},
                jepa={1e-5}, coca={1e-5})
    for name, eps in want.items():
        pool = create_probe(name, C, 5, **zoo_kwargs(name, N)).pool
        assert {m.eps for m in pool.modules() if isinstance(m, nn.LayerNorm)} == eps, name
    assert create_probe('cait', C, 5).pool.norm.eps == 1e-5 and create_probe('cait', C, 5).pool.block.norm1.eps == 1e-6


def test_esimpool_from_scratch():
    "esimpool: query LN(mean x), keys LN(x), values x, 12 heads, LN eps 1e-6 (the GAP query has variance ~1/N)"
    p, x = pool_of('esimpool'), tokens()
    w, b = p.norm.weight, p.norm.bias
    q, k = ln(x.mean(1, keepdim=True), w, b, 1e-6), ln(x, w, b, 1e-6)
    close(p(x), merge(attend(heads(q, 12), heads(k, 12), heads(x, 12)))[:, 0])


def test_simpool_from_scratch():
    "simpool: query W_Q mean(x), keys W_K LN(x), values LN(x), LN eps 1e-6"
    p, x = pool_of('simpool'), tokens()
    z = ln(x, p.norm.weight, p.norm.bias, 1e-6)
    close(p(x), attend(x.mean(1, keepdim=True) @ p.q.weight.T, z @ p.k.weight.T, z)[:, 0])


def test_clip_from_scratch():
    "clip: LN (eps 1e-6), mean token prepended, positional embedding, 4-head attention, output at the mean token"
    p, x = pool_of('clip'), tokens()
    a = p.attn_pool
    z = ln(x, p.norm.weight, p.norm.bias, 1e-6)
    t = torch.cat([z.mean(1, keepdim=True), z], 1) + a.pos_embed                 # (B, N + 1, C)
    q, k, v = [heads(u, 4) for u in (t @ a.qkv.weight.T + a.qkv.bias).chunk(3, -1)]
    close(p(x), merge(attend(q, k, v))[:, 0] @ a.proj.weight.T + a.proj.bias)


def test_cait_final_norm_eps():
    "cait: the final LayerNorm has eps 1e-5 (the block's are 1e-6); a small [CLS] makes the difference visible"
    p, x = pool_of('cait'), tokens()
    y = p.block(x, p.cls_token.expand(B, -1, -1))[:, 0]                              # timm's block, eps 1e-6 inside
    close(p(x), ln(y, p.norm.weight, p.norm.bias, 1e-5))


def test_dinovit_from_scratch():
    "dinovit: one pre-norm ViT block with LN eps 1e-5, no qkv bias, then the token mean"
    p, x = pool_of('dinovit'), tokens()
    bl, h = p.block, p.block.attn.num_heads
    q, k, v = [heads(u, h) for u in (ln(x, bl.norm1.weight, bl.norm1.bias, 1e-5) @ bl.attn.qkv.weight.T).chunk(3, -1)]
    y = x + merge(attend(q, k, v)) @ bl.attn.proj.weight.T + bl.attn.proj.bias
    m = ln(y, bl.norm2.weight, bl.norm2.bias, 1e-5) @ bl.mlp.fc1.weight.T + bl.mlp.fc1.bias
    y = y + nn.functional.gelu(m) @ bl.mlp.fc2.weight.T + bl.mlp.fc2.bias
    close(p(x), y.mean(1))


def cae_scratch(p, x, query, eps):
    "CAE's attentive block written out, its LayerNorms with `eps`"
    q = ln(query, p.norm_q.weight, p.norm_q.bias, eps) @ p.q.weight.T
    k = ln(x, p.norm_k.weight, p.norm_k.bias, eps) @ p.k.weight.T
    v = ln(x, p.norm_v.weight, p.norm_v.bias, eps) @ p.v.weight.T
    return merge(attend(heads(q, 8), heads(k, 8), heads(v, 8)))[:, 0] @ p.proj.weight.T + p.proj.bias


@pytest.mark.parametrize('pool_first', [True, False])
def test_cae_query_gradient_at_init(pool_first):
    "cae: eps 1e-5. At init the query is zero, so LN(query)'s gradient scales as 1/sqrt(eps): sqrt(10)x less than 1e-6's"
    p, x = pool_of('cae', pool_first=pool_first), tokens()
    with torch.no_grad(): p.query.zero_()
    w = torch.randn(B, C, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    (p(x) * w).sum().backward()
    grads = {}
    for eps in (1e-5, 1e-6):
        q = torch.zeros_like(p.query, requires_grad=True)
        y = cae_scratch(p, x, q.expand(B, -1, -1), eps); (y * w).sum().backward(); grads[eps] = q.grad
        if eps == 1e-5: close(p(x), y.detach())
    close(p.query.grad, grads[1e-5])
    ratio = (grads[1e-6].norm() / p.query.grad.norm()).item()
    assert abs(ratio - math.sqrt(10)) < 1e-3, ratio
