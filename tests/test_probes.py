"Tests of the installed package: public API, probe errors, and `ep_bench` end to end as a console script."
import subprocess, shutil
import pandas as pd, pytest, torch
import ep_probing
from ep_probing import MultiHeadCrossAttentionPool, EfficientProbing, create_probe

def test_public_api():
    assert {'MultiHeadCrossAttentionPool', 'EfficientProbing', 'create_probe'} <= set(dir(ep_probing))
    assert isinstance(create_probe('ep', 768, 1000).pool, EfficientProbing)
    assert isinstance(create_probe('mhca', 768, 1000).pool, MultiHeadCrossAttentionPool)

@pytest.mark.parametrize('bad, msg', [
    (lambda: EfficientProbing(768)(torch.randn(2, 768)), 'rank 2'),
    (lambda: EfficientProbing(768)(torch.randn(2, 4, 512)), 'dim=512'),
    (lambda: EfficientProbing(768, num_queries=5), 'not divisible'),
    (lambda: EfficientProbing(768, num_queries=0), '>= 1'),
    (lambda: create_probe('eep', 768, 10), 'valid probes: cls, gap'),
])
def test_bad_input_raises_value_error(bad, msg):
    with pytest.raises(ValueError, match=msg): bad()

def test_pool_first_equals_value_first_at_vitb_width():
    torch.manual_seed(0)
    ep, x = EfficientProbing(768), torch.randn(3, 196, 768)
    with torch.no_grad(): ep.query.normal_(0, 1)
    torch.testing.assert_close(ep.forward_pool_first(x), ep.forward_value_first(x), atol=1e-5, rtol=1e-5)

def test_ep_bench_console_script(tmp_path):
    exe = shutil.which('ep_bench')
    assert exe, "ep_bench is not installed as a console script; run `pip install -e .`"
    csv = tmp_path/'out'/'bench.csv'
    r = subprocess.run([exe, '--batch_size', '8', '--num_tokens', '16', '--dim', '64', '--num_classes', '10',
                        '--steps', '2', '--warmup', '1', '--csv', str(csv)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "ep_value_first: " in r.stdout and "mhca: " in r.stdout and "mhca_pool_first: " in r.stdout and "x ep's time" in r.stdout
    df = pd.read_csv(csv, index_col='probe')
    assert list(df.index) == ['ep', 'ep_value_first', 'mhca', 'mhca_pool_first']       # both probes in both orders
    assert df.loc['ep', 'fwd_mmacs_per_img'] < df.loc['ep_value_first', 'fwd_mmacs_per_img']
    assert df.loc['mhca_pool_first', 'fwd_mmacs_per_img'] < df.loc['mhca', 'fwd_mmacs_per_img']
    assert not list(csv.parent.glob('*.tmp'))                      # the CSV was written atomically

def test_ep_bench_bad_probe_is_a_clear_error():
    r = subprocess.run([shutil.which('ep_bench'), '--probes', 'ep,nope', '--steps', '1'], capture_output=True, text=True, timeout=300)
    assert r.returncode != 0 and "unknown probe 'nope'" in r.stderr
