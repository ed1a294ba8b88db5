"Tests of the installed zoo of baseline probes: paper parameter counts, forward + backward, bad inputs."
import pytest, torch
import ep_probing.zoo as zoo
from ep_probing.probes import create_probe, list_probes, probe_registry, n_params

ZOO = ['abmilp', 'simpool', 'esimpool', 'clip', 'siglip', 'aim', 'coca', 'cait', 'dinovit', 'jepa', 'dolg', 'cae', 'cbam']
C, N, K = 96, 16, 7  # C divisible by every default head count; N a 4 x 4 grid

def test_every_zoo_probe_is_registered():
    assert set(ZOO) <= set(list_probes(False))
    for name in ZOO:
        grid = name in ('clip', 'dolg', 'cbam')
        assert probe_registry[name]['grid'] == grid and probe_registry[name]['attention']
        assert (f'{name}_all' in list_probes()) == (not grid)

@pytest.mark.parametrize('name', list_probes(False))
def test_paper_param_counts(name):
    "Pool parameters at C=768, K=1000, N=196 equal the paper's table; totals add the classifier"
    p = create_probe(name, 768, 1000, **zoo.zoo_kwargs(name, 196))
    assert n_params(p.pool) == zoo.paper_pool_params[name]
    assert n_params(p) == zoo.paper_pool_params[name] + 768 * 1000 + 1000

def test_paper_numbers_spot_check():
    "A few of the paper's numbers typed out, so a wrong `paper_pool_params` entry cannot hide"
    assert zoo.paper_pool_params['siglip'] == 7_085_568 and zoo.paper_pool_params['cbam'] == 73_828
    assert n_params(create_probe('coca', 768, 1000)) == 1_036_032 + 769_000
    assert n_params(create_probe('cae', 768, 1000).pool) == 2_366_976

@pytest.mark.parametrize('name', [n for n in list_probes() if n.removesuffix('_all') in ZOO])
def test_forward_backward(name):
    torch.manual_seed(0)
    p = create_probe(name, C, K, **zoo.zoo_kwargs(name, N))
    x, prefix = torch.randn(4, N, C, requires_grad=True), torch.randn(4, 1, C)
    y = p(x, prefix)
    assert y.shape == (4, K) and y.isfinite().all()
    y.logsumexp(-1).sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    assert p.head.weight.grad.abs().sum() > 0
    a = p.attn_weights(x.detach(), prefix)
    assert a.shape[0] == 4 and a.shape[-1] == (N + 1 if name.endswith('_all') else N)
    torch.testing.assert_close(a.sum(-1), torch.ones(a.shape[:2]), atol=1e-5, rtol=0)
    p.eval()
    assert p(x[:1], prefix[:1]).shape == (1, K)

def test_wrong_width():
    for name in ZOO:
        p = create_probe(name, C, K, **zoo.zoo_kwargs(name, N))
        with pytest.raises(ValueError, match=f'dim={C + 1}'): p(torch.randn(2, N, C + 1))

def test_non_square_grid():
    for name in ('dolg', 'cbam'):
        with pytest.raises(ValueError, match='not a square'): create_probe(name, C, K)(torch.randn(2, 15, C))
    with pytest.raises(ValueError, match='not a square'): create_probe('clip', C, K, num_tokens=15)

def test_clip_token_count():
    with pytest.raises(ValueError, match='num_tokens=16'): create_probe('clip', C, K)(torch.randn(2, 16, C))

def test_bad_names_and_options():
    with pytest.raises(ValueError, match='unknown probe'): create_probe('simpol', C, K)
    with pytest.raises(ValueError, match='unknown probe'): create_probe('dolg_all', C, K)
    with pytest.raises(ValueError, match='accepts'): create_probe('siglip', C, K, heads=4)
    with pytest.raises(ValueError, match='num_heads'): create_probe('esimpool', 100, K)
