"Tests of `ep_probing.mae`: the console script end to end, resuming, and the shipped encoder asset"
import json, subprocess, sys, torch, timm
from ep_probing.data import FashionMNIST
from ep_probing.core import file_sha256 as sha256
from ep_probing.mae import (MaskedAutoencoder, mae_train, ep_pretrain, load_encoder, mae_fmnist_stem)

TINY = dict(bs=32, limit=64, depth=1, embed_dim=24, num_heads=2, decoder_dim=16, decoder_depth=1, patch_size=7)

def test_pretrain_console_function(tmp_path):
    "Two steps (64 images, batch 32) of the real pipeline through `ep_pretrain`"
    meta = ep_pretrain(out=str(tmp_path/'vit'), epochs=1, **TINY)
    for ext in ('safetensors', 'json', 'ckpt'): assert (tmp_path/f'vit.{ext}').is_file()
    assert not list(tmp_path.glob('*.tmp'))
    enc, meta2 = load_encoder(tmp_path/'vit')
    assert isinstance(enc, timm.models.VisionTransformer) and meta2 == json.loads(json.dumps(meta))
    assert enc(torch.randn(2, 1, 28, 28)).shape == (2, 24)
    p = meta['provenance']
    assert p['epochs_done'] == 1 and len(p['loss_curve']) == 1 and p['loss_curve'][0] > 0
    assert p['data_sha256'] == {f.name: sha256(f) for f in FashionMNIST('train').files}

def test_cli_subprocess(tmp_path):
    "The script runs as a command (`ep_pretrain` once installed; `python -m ep_probing.mae` here)"
    flags = [f'--{k}={v}' for k, v in TINY.items()]
    r = subprocess.run([sys.executable, '-m', 'ep_probing.mae', '--out', str(tmp_path/'v'), '--epochs', '1', *flags],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path/'v.json').read_text())['provenance']['epochs_done'] == 1
    h = subprocess.run([sys.executable, '-m', 'ep_probing.mae', '--help'], capture_output=True, text=True, timeout=120)
    assert '--restart' in h.stdout and '--epochs' in h.stdout

def test_loss_decreases_on_tiny_batch():
    "Overfitting 16 real images: the loss falls over a few steps"
    imgs = FashionMNIST('test').images[:16, None]
    torch.manual_seed(0)
    vit = timm.models.VisionTransformer(img_size=28, patch_size=7, in_chans=1, embed_dim=32, depth=2, num_heads=2, num_classes=0)
    losses = mae_train(MaskedAutoencoder(vit, decoder_dim=32, decoder_depth=1), imgs, epochs=12, bs=16, lr=3e-3, warmup=0,
                       mean=0.286, std=0.353)
    assert losses[-1] < 0.9 * losses[0], losses

KILL = """
import os, sys, ep_probing.mae as m
save = m.save_encoder
def save_then_die(encoder, stem, meta):
    save(encoder, stem, meta)
    if meta['provenance']['epochs_done'] == 1: os._exit(9)         # killed hard after epoch 1 was saved
m.save_encoder = save_then_die
m.ep_pretrain(out=sys.argv[1], epochs=3, **{kw})
"""

def test_killed_run_resumes_to_the_same_weights(tmp_path):
    "`ep_pretrain` killed after its first epoch, then run again, ends with the weights and losses of an uninterrupted run"
    a, b = str(tmp_path/'a'), str(tmp_path/'b')
    full = ep_pretrain(out=a, epochs=3, **TINY)
    r = subprocess.run([sys.executable, '-c', KILL.replace('{kw}', repr(TINY)), b], capture_output=True, text=True, timeout=300)
    assert r.returncode == 9, r.stderr[-2000:]
    assert json.loads((tmp_path/'b.json').read_text())['provenance']['epochs_done'] == 1 and (tmp_path/'b.ckpt').is_file()
    resumed = ep_pretrain(out=b, epochs=3, **TINY)
    assert resumed['provenance']['epochs_done'] == 3
    assert torch.allclose(torch.tensor(resumed['provenance']['loss_curve']), torch.tensor(full['provenance']['loss_curve']), atol=1e-5)
    ea, eb = load_encoder(a)[0], load_encoder(b)[0]
    for (k, p), q in zip(ea.state_dict().items(), eb.state_dict().values()): assert torch.allclose(p, q, atol=1e-5), k
    restarted = ep_pretrain(out=b, epochs=1, restart=True, **TINY)
    assert restarted['provenance']['epochs_done'] == 1

def test_pretraining_lowers_the_loss(tmp_path):
    "A tiny `ep_pretrain` run on 512 real images: the loss falls from the first epoch to the last"
    meta = ep_pretrain(out=str(tmp_path/'v'), epochs=4, bs=64, limit=512, depth=1, embed_dim=32, num_heads=2, decoder_dim=16, decoder_depth=1,
                       patch_size=7, lr=3e-3)
    curve = meta['provenance']['loss_curve']
    assert len(curve) == 4 and curve[-1] < 0.95 * curve[0], curve

def test_shipped_asset():
    "The embedded encoder: <= 15 MB safetensors, loads into timm, full provenance, and EP beats LP on [CLS]"
    st, js = mae_fmnist_stem.with_suffix('.safetensors'), mae_fmnist_stem.with_suffix('.json')
    assert st.is_file() and js.is_file()
    assert st.stat().st_size <= 15 * 2**20
    enc, meta = load_encoder(mae_fmnist_stem)
    kw = meta['model_kwargs']
    assert (kw['img_size'], kw['patch_size'], kw['in_chans'], kw['embed_dim'], kw['depth'], kw['num_heads'], kw['num_classes']) == (28, 4, 1, 192, 6, 3, 0)
    assert isinstance(enc, timm.models.VisionTransformer) and not enc.training
    assert len(meta['mean']) == len(meta['std']) == 1
    p = meta['provenance']
    for k in ('command', 'seed', 'epochs', 'epochs_done', 'loss_curve', 'data_sha256', 'versions', 'wall_seconds', 'probe_eval'):
        assert k in p, k
    assert p['epochs_done'] == len(p['loss_curve']) == p['epochs'] and p['command'].startswith('ep_pretrain')
    assert p['epochs'] > 8, "the issue asks for longer pretraining than its own 8-epoch trial"
    assert p['loss_curve'][-1] < p['loss_curve'][0]
    assert p['data_sha256'] == {f.name: sha256(f) for f in FashionMNIST('train').files}
    acc = p['probe_eval']
    assert acc['mae']['ep'] >= acc['mae']['cls'] + 4 and acc['mae']['ep'] > acc['mae']['gap']    # EP clearly beats LP on [CLS]
    assert all(acc['mae'][k] > acc['random_init'][k] for k in ('cls', 'gap', 'ep', 'mhca'))       # pretraining helps every probe
    # real images through the encoder: finite tokens of the right shape
    x = (FashionMNIST('test').images[:4, None].float() / 255 - meta['mean'][0]) / meta['std'][0]
    (t, pre), = enc.forward_intermediates(x, indices=[5], output_fmt='NLC', intermediates_only=True, return_prefix_tokens=True)
    assert t.shape == (4, 49, 192) and pre.shape == (4, 1, 192) and torch.isfinite(t).all()

def test_short_name_loads_the_shipped_asset():
    "`create_encoder('mae_fmnist')` is the shipped ViT: same weights, frozen, its own normalisation, tokens of the blocks asked for"
    from ep_probing.encoders import create_encoder
    enc = create_encoder('mae_fmnist', layers=[0, 5])
    vit, meta = load_encoder(mae_fmnist_stem)
    assert enc.name == 'mae_fmnist' and tuple(enc.mean) == tuple(meta['mean']) and tuple(enc.std) == tuple(meta['std'])
    assert all(torch.equal(a, b) for a, b in zip(enc.model.state_dict().values(), vit.state_dict().values()))
    assert not any(p.requires_grad for p in enc.parameters()) and not enc.model.training
    x = (FashionMNIST('test').images[:2, None].float() / 255 - meta['mean'][0]) / meta['std'][0]
    out = enc.forward_tokens(x)
    assert sorted(out) == [0, 5] and out[5][0].shape == (2, 49, 192) and out[5][1].shape == (2, 1, 192)
