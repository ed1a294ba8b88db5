__version__ = "0.1.0"

import warnings
with warnings.catch_warnings():   # fastai's import calls the deprecated `torch.jit.script`; the warning says nothing to our users
    warnings.filterwarnings('ignore', message=r'`torch\.jit\.script` is deprecated', category=FutureWarning)
    import fastai.layers

# The public API is small on purpose: the two attention pools of the derivation's ends, and the
# probe factory. Everything else is one `from ep_probing.<module> import ...` away.
from .mhca import MultiHeadCrossAttentionPool
from .ep import EfficientProbing
from .probes import create_probe, list_probes, Probe
from . import zoo  # registers the baseline probes of the paper's benchmark with `create_probe`
