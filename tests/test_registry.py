"Tests of the probe registry: complete whatever is imported, pool classes registered themselves, options checked."
import inspect, os, subprocess, sys
from pathlib import Path
import pytest, torch
import ep_probing.zoo as zoo
from ep_probing.probes import create_probe, list_probes, probe_registry

root = Path(zoo.__file__).resolve().parents[1]    # the checkout whose package these tests import

def fresh(code:str)->str:
    "stdout of `code` run by a fresh interpreter on this checkout's package"
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(root), os.environ.get('PYTHONPATH', '')])}
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, cwd=root, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()

def test_registry_is_complete_without_importing_the_zoo():
    "A caller that imports `probes` alone sees every probe at its first lookup, in the paper's order"
    out = fresh("import sys; from ep_probing.probes import probe_registry, list_probes\n"
                "print('ep_probing.zoo' in sys.modules, len(list_probes(False)), ','.join(probe_registry))")
    loaded, n, names = out.split()
    assert loaded == 'False'                                 # importing `probes` does not import the zoo (no circle)
    assert int(n) == len(zoo.paper_pool_params) == 18
    assert names.split(',') == list(zoo.paper_pool_params)   # the paper's 18 probes, in its table's order

def test_package_import_stays_light():
    assert fresh("import ep_probing.core, sys; print('torch' in sys.modules, 'ep_probing.zoo' in sys.modules)") \
        == 'False False'

def test_lookups_see_the_zoo():
    "`create_probe` and `probe_entry` find a zoo pool in a fresh interpreter that imported `probes` alone"
    out = fresh("from ep_probing.probes import create_probe, probe_entry\n"
                "print(type(create_probe('siglip', 96, 5).pool).__name__, probe_entry('clip')['grid'])")
    assert out == 'SigLIPPool True'

zoo_classes = {n: r['factory'] for n, r in probe_registry.items() if n not in ('cls', 'mhca', 'mqca')}

@pytest.mark.parametrize('name', list(zoo_classes))
def test_pool_classes_registered_themselves(name):
    "Every pool but the three whose arguments are assembled is its class, with the class's own options"
    cls = probe_registry[name]['factory']
    assert inspect.isclass(cls) and issubclass(cls, torch.nn.Module), cls
    p = create_probe(name, 96, 5, **zoo.zoo_kwargs(name, 16))
    assert type(p.pool) is cls

@pytest.mark.parametrize('name', list_probes())
def test_every_probe_round_trips_with_the_class_defaults(name):
    "`create_probe` with no options builds what the registered class (or factory) builds with its own defaults"
    entry = probe_registry[name.removesuffix('_all')]
    kw = zoo.zoo_kwargs(name, 16)
    torch.manual_seed(0); p = create_probe(name, 96, 5, **kw)
    torch.manual_seed(0); pool = entry['factory'](96, **kw)
    sig = inspect.signature(entry['factory']).parameters
    stored = {k: v.default for k, v in sig.items()                          # the options the pool keeps as values
              if k not in ('dim', *kw) and v.default is not None and isinstance(getattr(p.pool, k, None), (bool, int, float))}
    assert {k: getattr(p.pool, k) for k in stored} == stored, name
    a, b = p.pool.state_dict(), pool.state_dict()
    assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a), name
    torch.manual_seed(0); q = create_probe(**p.config)                    # the config rebuilds it
    assert q.tokens == p.tokens and q.config == p.config
    c = q.state_dict()
    assert all(torch.equal(c[k], v) for k, v in p.state_dict().items()), name

@pytest.mark.parametrize('name, kw', [('abmilp', dict(num_head=2)), ('gap', dict(num_heads=2)),
                                      ('ep_all', dict(num_querys=4)), ('lp', dict(index=1))])
def test_unknown_option_is_one_line(name, kw):
    with pytest.raises(ValueError) as e: create_probe(name, 32, 10, **kw)
    msg, bad = str(e.value), next(iter(kw))
    r = probe_registry[name.removesuffix('_all')] if name != 'lp' else probe_registry['cls']
    ok = [k for k in inspect.signature(r['factory']).parameters if k != 'dim']
    assert msg == f"probe {name!r} got unknown options [{bad!r}]; it accepts {ok}", msg
    assert '\n' not in msg
