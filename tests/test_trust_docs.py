"Names and pages a researcher reads: the `lp` alias, the README's length and citation, the guides' claims."
import json, re
from pathlib import Path
import torch
from ep_probing.probes import create_probe, TokenPool

root = Path(__file__).resolve().parent.parent

def test_lp_is_an_alias_of_cls():
    torch.manual_seed(0)
    p = create_probe('lp', 32, 10)
    assert isinstance(p.pool, TokenPool) and p.tokens == 'prefix'
    x, prefix = torch.randn(2, 16, 32), torch.randn(2, 1, 32)
    assert p(x, prefix).shape == (2, 10)
    q = create_probe(**p.config)                       # the config rebuilds it
    assert q.tokens == 'prefix' and q.config == p.config
