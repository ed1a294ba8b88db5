"timm families through `create_encoder`: token shapes, prefix counts, spatial order, image size and a one-epoch probe fit, random weights, offline"
import functools, math, os, subprocess, sys
from pathlib import Path
import numpy as np, pytest, torch, timm
from PIL import Image
from ep_probing.encoders import create_encoder

ROOT = Path(__file__).resolve().parents[1]

# family: (timm name, kwargs that shrink it, prefix tokens P, token grid side at the built size)
FAMILIES = {
    'vit':      ('vit_tiny_patch16_224', dict(img_size=64, depth=2), 1, 64 // 16),                              # MAE / DeiT
    'dinov2':   ('vit_small_patch14_reg4_dinov2', dict(img_size=56, depth=2, embed_dim=64, num_heads=2), 5, 56 // 14),  # [CLS] + 4 registers
    'clip':     ('vit_base_patch16_clip_224', dict(img_size=64, depth=2, embed_dim=64, num_heads=2), 1, 64 // 16),
    'siglip':   ('vit_base_patch16_siglip_224', dict(img_size=64, depth=2, embed_dim=64, num_heads=2), 0, 64 // 16),    # no [CLS]: an attention-pool head
    'eva02':    ('eva02_tiny_patch14_224', dict(img_size=56, depth=2), 1, 56 // 14),
    'beitv2':   ('beitv2_base_patch16_224', dict(img_size=64, depth=2, embed_dim=64, num_heads=2), 1, 64 // 16),
    'aimv2':    ('aimv2_large_patch14_224', dict(img_size=56, depth=2, embed_dim=64, num_heads=2), 0, 56 // 14),        # no [CLS]
    'hiera':    ('hiera_tiny_224', dict(img_size=64, embed_dim=32, stages=(1, 1, 1, 1)), 0, 64 // 32),
    'swin':     ('swin_tiny_patch4_window7_224', dict(img_size=64, window_size=4, depths=(1, 1, 1, 1), embed_dim=32, num_heads=(1, 2, 4, 8)), 0, 64 // 32),
    'convnext': ('convnext_atto', dict(img_size=64), 0, 64 // 32),
    'resnet':   ('resnet18', dict(img_size=64), 0, 64 // 32),
    'effnet':   ('efficientnet_b0', dict(img_size=64), 0, 64 // 32),
}

@functools.cache
def encoder(family):
    name, kw, _, _ = FAMILIES[family]
    torch.manual_seed(0)
    return create_encoder(name, pretrained=False, num_classes=0, **kw)

@pytest.mark.parametrize('family', FAMILIES)
def test_tokens(family):
    name, kw, P, side = FAMILIES[family]
    enc = encoder(family)
    assert enc.img_size == (kw['img_size'],) * 2
    x = torch.randn(2, 3, *enc.img_size, generator=torch.Generator().manual_seed(1))
    patch, prefix = enc(x)
    C = enc.model.num_features                                # the model's output width
    assert patch.shape == (2, side * side, C) and prefix.shape == (2, P, C)
    assert enc.num_prefix_tokens == P == getattr(enc.model, 'num_prefix_tokens', 0)
    assert enc.embed_dim == C
    assert patch.isfinite().all() and prefix.isfinite().all() and patch.std() > 0

@pytest.mark.parametrize('family', FAMILIES)
def test_one_epoch_of_probes(family):
    from fastai.data.core import DataLoaders
    from ep_probing.fit import fit_probes
    enc = encoder(family)
    g = torch.Generator().manual_seed(0)
    ds = [(torch.randn(3, *enc.img_size, generator=g), torch.tensor(i % 3)) for i in range(8)]
    dls = DataLoaders.from_dsets(ds[:4], ds[4:], bs=2, device='cpu')
    specs = ['gap', 'ep', 'mhca'] + (['lp'] if enc.num_prefix_tokens else [])
    learn = fit_probes(dls, specs, 3, enc.embed_dim, epochs=1, progress=False, encoder=enc, opt='adamw')
    assert len(learn.learn.recorder.losses) == 2 and all(math.isfinite(float(l)) for l in learn.learn.recorder.losses)
    assert math.isfinite(learn.learn.recorder.values[-1][1])                       # validation loss
    assert sorted(learn.results.index) == sorted(specs) and learn.results['top1'].notna().all()

def localised(name, **kw):
    "A model whose blocks are identities plus local ops (attention and MLP outputs zeroed): a token sees only its own image cell"
    torch.manual_seed(0)
    m = timm.create_model(name, num_classes=0, **kw)
    for n, p in m.named_parameters():
        if '.attn.proj.' in n or '.mlp.fc2.' in n: p.data.zero_()
    return m.eval()

@pytest.mark.parametrize('name,kw,stride', [
    ('hiera_tiny_224', dict(img_size=128, embed_dim=32, stages=(1, 1, 1, 1), q_pool=2), 16),   # forward_features is in unrolled order here
    ('swin_tiny_patch4_window7_224', dict(img_size=128, window_size=4, depths=(1, 1, 1, 1), embed_dim=32, num_heads=(1, 2, 4, 8)), 32)])
def test_tokens_in_row_major_spatial_order(name, kw, stride):
    enc = create_encoder(localised(name, **kw))
    x0 = torch.zeros(1, 3, 128, 128); x1 = x0.clone()
    x1[..., 40:56, 72:88] = 3.                                               # a bright square
    d = (enc(x1)[0] - enc(x0)[0]).norm(dim=-1)[0]                            # (N,) how much each token changed
    side = 128 // stride
    rows, cols = range(40 // stride, 55 // stride + 1), range(72 // stride, 87 // stride + 1)
    assert d.shape == (side * side,)
    assert sorted(d.nonzero().flatten().tolist()) == sorted(r * side + c for r in rows for c in cols)

def test_hiera_tiny_224_at_its_size():
    enc = create_encoder('hiera_tiny_224', pretrained=False)
    p, q = enc(torch.randn(1, 3, 224, 224))
    assert p.shape == (1, 7 * 7, 768) and q.shape == (1, 0, 768) and enc.embed_dim == 768 and enc.img_size == (224, 224)
    with pytest.raises(ValueError, match='norm=True: Hiera cannot normalise'): create_encoder(enc.model, norm=True)(torch.randn(1, 3, 224, 224))

@pytest.mark.parametrize('name,kw', [('swin_tiny_patch4_window7_224', dict(img_size=64, window_size=4, depths=(1, 1, 1, 1), embed_dim=32, num_heads=(1, 2, 4, 8))),
                                     ('convnext_atto', {}), ('resnet18', {}), ('efficientnet_b0', {})])
def test_last_feature_map_is_forward_features(name, kw):
    torch.manual_seed(0)
    m = timm.create_model(name, num_classes=0, **kw).eval()
    x = torch.randn(2, 3, 64, 64)
    p, _ = create_encoder(m, norm=True)(x)
    f = m.forward_features(x)
    ref = f.flatten(1, 2) if getattr(m, 'output_fmt', 'NCHW') == 'NHWC' else f.flatten(2).transpose(1, 2)
    torch.testing.assert_close(p, ref)

def test_img_size_dinov2():
    enc = create_encoder('vit_small_patch14_reg4_dinov2', pretrained=False, img_size=224, depth=1)
    assert enc.img_size == (224, 224) and enc.data_config['input_size'] == (3, 224, 224)
    p, q = enc(torch.randn(1, 3, 224, 224))
    assert p.shape == (1, 16 * 16, 384) and q.shape == (1, 5, 384)
    assert create_encoder('vit_small_patch14_reg4_dinov2', pretrained=False, depth=1).img_size == (518, 518)   # timm's default: 37 x 37 = 1,369 tokens

@pytest.mark.parametrize('name,kw,side', [('convnext_atto', {}, 3), ('efficientnet_lite0', {}, 3), ('hiera_tiny_224', dict(stages=(1, 1, 1, 1)), 3),
                                          ('swin_tiny_patch4_window7_224', dict(window_size=3, depths=(1, 1, 1, 1)), 3)])
def test_img_size_sets_transform_and_model(name, kw, side):
    enc = create_encoder(name, pretrained=False, img_size=96, **kw)
    img = Image.fromarray(np.random.default_rng(0).integers(0, 255, (40, 50, 3), dtype=np.uint8))
    x = enc.transform()(img)
    assert enc.img_size == (96, 96) and x.shape == (3, 96, 96)
    assert enc(x[None])[0].shape == (1, side * side, enc.model.num_features)

def test_img_size_a_fixed_model_cannot_take():
    vit = timm.models.VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2, num_classes=0)
    with pytest.raises(ValueError, match=r'img_size=64: VisionTransformer takes \(32, 32\) images only'): create_encoder(vit, img_size=64)
    assert create_encoder(vit, img_size=32).img_size == (32, 32)

def test_lite0_imagenet_emits_no_future_warning():
    code = "from ep_probing.encoders import create_encoder; create_encoder('efficientnet_lite0_imagenet', num_classes=0)"
    r = subprocess.run([sys.executable, '-W', 'error::FutureWarning', '-c', code], env={**os.environ, 'PYTHONPATH': str(ROOT)},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert 'Warning' not in r.stderr
