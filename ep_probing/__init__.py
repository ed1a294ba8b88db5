__version__ = "0.1.0"

import warnings
# fastai's import calls the deprecated `torch.jit.script`; the warning says nothing to our users
warnings.filterwarnings('ignore', message=r'`torch\.jit\.script` is deprecated', category=FutureWarning)

# The public API is small on purpose: the two attention pools of the derivation's ends, and the
# probe factory. Everything else is one `from ep_probing.<module> import ...` away. They load on first
# use, so that a command can check its flags before torch, timm and fastai are imported.
_public = dict(MultiHeadCrossAttentionPool='mhca', EfficientProbing='ep',
               create_probe='probes', list_probes='probes', Probe='probes')

def __getattr__(name):
    if name not in _public: raise AttributeError(f"module 'ep_probing' has no attribute {name!r}")
    import importlib
    return getattr(importlib.import_module(f'.{_public[name]}', __name__), name)

def __dir__(): return sorted([*globals(), *_public])
