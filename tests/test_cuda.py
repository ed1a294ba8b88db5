"""CUDA tests (issue 15): run only with `pytest --cuda` on a machine with a CUDA GPU (tests/gpu_check.sh does).
Without `--cuda` they are deselected by tests/conftest.py; with it and no GPU they fail, never skip."""
import pytest, torch, torch.nn.functional as F
from fastai.data.core import DataLoaders
from ep_probing.probes import create_probe
from ep_probing.encoders import create_encoder
from ep_probing.fit import fit_probes
from ddp_fit import synthetic_tokens                      # tests/ is on sys.path (pytest's rootdir-relative import)

pytestmark = pytest.mark.cuda
DEV = 'cuda'

def rel_err(a, b): return ((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-12)).item()

def test_cuda_is_there():
    assert torch.cuda.is_available(), "pytest --cuda needs a CUDA GPU (torch.cuda.is_available() is False)"

@pytest.mark.parametrize('name', ['gap', 'ep', 'mhca'])
def test_probe_bf16_autocast_matches_fp32(name):
    "Forward and backward of a probe under bf16 autocast on CUDA agree with fp32 on CUDA"
    torch.manual_seed(0)
    B, N, C, K = 32, 196, 768, 100
    x, prefix, y = torch.randn(B, N, C, device=DEV), torch.randn(B, 1, C, device=DEV), torch.randint(0, K, (B,), device=DEV)
    p = create_probe(name, C, K).to(DEV).train()
    def step(amp):
        p.zero_grad(set_to_none=True)
        with torch.autocast(DEV, dtype=torch.bfloat16, enabled=amp):
            out = p(x, prefix)
        F.cross_entropy(out.float(), y).backward()
        return out.detach().float(), {k: v.grad.detach().clone() for k, v in p.named_parameters() if v.grad is not None}
    out32, g32 = step(False)
    out16, g16 = step(True)
    assert out16.device.type == 'cuda' and out16.isfinite().all()
    assert rel_err(out16, out32) < 3e-2, rel_err(out16, out32)
    assert g16.keys() == g32.keys() and len(g32) > 0
    for k in g32: assert rel_err(g16[k], g32[k]) < 5e-2, (k, rel_err(g16[k], g32[k]))

def test_mae_fmnist_tokens_cuda_match_cpu():
    "The embedded MAE encoder gives the same tokens on CUDA as on the CPU (fp32), and close ones under bf16"
    torch.manual_seed(0)
    enc_cpu = create_encoder('mae_fmnist')
    x = torch.randn(16, enc_cpu.in_chans, *enc_cpu.img_size)
    p_cpu, q_cpu = enc_cpu(x)
    p, q = create_encoder('mae_fmnist', device=DEV)(x.to(DEV))
    assert p.device.type == 'cuda' and p.shape == p_cpu.shape and q.shape == q_cpu.shape
    assert rel_err(p.cpu(), p_cpu) < 1e-2 and rel_err(q.cpu(), q_cpu) < 1e-2, (rel_err(p.cpu(), p_cpu), rel_err(q.cpu(), q_cpu))
    pb, _ = create_encoder('mae_fmnist', device=DEV, precision='bf16')(x.to(DEV))
    assert rel_err(pb.cpu(), p_cpu) < 5e-2, rel_err(pb.cpu(), p_cpu)

def test_fit_probes_one_epoch_cuda_pinned(tmp_path):
    "fit_probes trains on CUDA from a pinned-memory DataLoader (mixed precision by default) and writes its results"
    dls = DataLoaders.from_dsets(synthetic_tokens(), synthetic_tokens(seed=1), bs=32, shuffle=True, pin_memory=True, device=DEV)
    assert dls.train.pin_memory
    learn = fit_probes(dls, ['gap', 'ep:num_queries=4'], 2, 32, epochs=1, out=tmp_path/'fit', layer_order=[0], opt='adamw',
                       blr=0.5, progress=False)
    assert all(p.device.type == 'cuda' for p in learn.model.parameters())
    assert learn.learn.dls.train.one_batch()[0].device.type == 'cuda'
    r = learn.results
    assert list(r.index) == ['gap', 'ep_num_queries=4'] and r.top1.notna().all() and (r.top1 > 0.5).all(), r
    assert (tmp_path/'fit'/'results.csv').exists() and (tmp_path/'fit'/'heads'/'ep_num_queries=4.safetensors').exists()
