"Leaderboard backbones: every registry row checked offline against the installed timm, and create_encoder's use of them"
import re
import pytest, torch, timm
from timm.models import get_pretrained_cfg
from timm.data import IMAGENET_DEFAULT_MEAN
from ep_probing.backbones import backbone_registry, backbone_table, resolve_backbone
from ep_probing.encoders import create_encoder, encoder_registry

ROWS = list(backbone_registry.values())
BUILDABLE = [b for b in ROWS if b.timm_name is not None]
def name_of(b): return b.name

def meta_tokens(enc, size):
    "Patch and prefix tokens of an encoder built on the meta device: the shapes, without weights or arithmetic"
    # `FrozenEncoder.forward` autocasts, which the meta device does not support: run the backbone pass it wraps
    return enc._features(torch.empty(2, 3, size, size, device='meta'))[-1]

def test_registry_rows():
    assert len(ROWS) == 37 and len({b.paper_name for b in ROWS}) == 37
    for b in ROWS:
        assert re.fullmatch(r'[a-z0-9]+(_[a-z0-9]+)+', b.name), b.name
        assert b.lp in ('cls', 'gap') and b.ep in ('ep', 'ep_all') and b.img_size % b.patch_size == 0, b.name
        assert b.name not in encoder_registry and not timm.is_model(b.name), b.name    # shadows no other name
        assert resolve_backbone(b.name) is b and resolve_backbone(b.paper_name) is b
    assert resolve_backbone('mae_vit_huge') is None
    df = backbone_table()
    assert df.shape == (37, 14) and df.name.tolist() == list(backbone_registry)
    assert df.weights.value_counts().to_dict() == {'timm': 24, 'checkpoint': 11, 'own code': 2}

@pytest.mark.parametrize('b', BUILDABLE, ids=name_of)
def test_timm_name(b):
    "A tagged name is a pretrained tag of the installed timm, with a place to fetch it; an untagged one a timm model"
    if b.weights == 'timm':
        assert b.timm_name in timm.list_pretrained(b.timm_name.split('.')[0] + '.*')
        cfg = get_pretrained_cfg(b.timm_name)
        assert cfg is not None and (cfg.hf_hub_id or cfg.url), b.timm_name
    else: assert '.' not in b.timm_name and timm.is_model(b.timm_name)

def test_rows_needing_a_checkpoint_are_not_in_timm():
    "What those rows' sources say about timm holds for the installed timm"
    tags = timm.list_pretrained()
    for m in ('ibot', 'mocov3', 'maskfeat', 'simmim', 'franca', 'capi', 'radio_v2'):
        assert not [t for t in tags if m in t], m
    assert 'vit_small_patch16_224.mae' not in tags
    assert all('_ft_' in t for t in timm.list_pretrained('beitv2_base_patch16_224.*'))   # fine-tuned only

@pytest.mark.parametrize('b', BUILDABLE, ids=name_of)
def test_token_shapes(b):
    "Each architecture, built whole on the meta device at the paper's size: N patch tokens, P prefix tokens, width C"
    with torch.device('meta'): enc = create_encoder(b.name, pretrained=False)
    p, q = meta_tokens(enc, b.img_size)
    assert (enc.name, enc.img_size, enc.weights) == (b.name, (b.img_size, b.img_size), 'random init')
    assert tuple(p.shape) == (2, (b.img_size // b.patch_size) ** 2, b.dim)
    assert tuple(q.shape) == (2, b.num_prefix_tokens, b.dim)
    assert (enc.num_prefix_tokens, enc.embed_dim) == (b.num_prefix_tokens, b.dim)
    if 'Beyond [cls]' in b.source: assert enc.mean == IMAGENET_DEFAULT_MEAN      # as the paper's loader normalised
    if b.norm: assert not isinstance(enc.model.norm, torch.nn.Identity)            # norm=True reads a real final norm

@pytest.mark.parametrize('name, kw', [('mae_vit_small', {}), ('dinov2_vit_base', dict(depth=1)),
                                      ('hiera_base', dict(stages=(1, 1, 1, 1)))])
def test_real_forward(name, kw):
    "Random weights on the CPU: the shapes the meta device predicted, finite values"
    b = resolve_backbone(name)
    torch.manual_seed(0)
    enc = create_encoder(name, pretrained=False, **kw)
    p, q = enc(torch.randn(2, 3, b.img_size, b.img_size))
    assert (p.shape, q.shape) == ((2, b.num_patches, b.dim), (2, b.num_prefix_tokens, b.dim))
    assert torch.isfinite(p).all()

def test_img_size_and_kwargs_override():
    with torch.device('meta'): enc = create_encoder('dinov2_vit_base', pretrained=False, img_size=112, depth=2)
    assert (enc.name, enc.img_size, len(enc.model.blocks)) == ('dinov2_vit_base', (112, 112), 2)
    assert tuple(meta_tokens(enc, 112)[0].shape) == (2, 64, 768)                   # 8 x 8 patches of 14 px

def test_errors():
    "Weights timm has not got: one line naming --checkpoint and the format; no timm architecture; an unknown name"
    with pytest.raises(ValueError) as e: create_encoder('ibot_vit_base')
    msg = str(e.value)
    assert '\n' not in msg and '--checkpoint' in msg and "keys in timm's VisionTransformer layout" in msg, msg
    with pytest.raises(ValueError, match="franca_vitl14_Laion600M.pth"): create_encoder('franca_vit_large')
    with pytest.raises(ValueError, match=r'capi_vit_large \(CAPI ViT-L/14\) is not a timm model'):
        create_encoder('capi_vit_large')
    with pytest.raises(ValueError, match='is not a timm model'): create_encoder('dit_xl', pretrained=False)
    with pytest.raises(ValueError, match="unknown timm model 'mae_vit_huge'"): create_encoder('mae_vit_huge')

def test_checkpoint_in_the_vit_layout(tmp_path):
    "A MoCo v3 checkpoint saved as MAE-style projects do ('model') loads into the row's architecture"
    b = resolve_backbone('mocov3_vit_base')
    torch.manual_seed(0)
    sd = timm.create_model(b.timm_name, depth=1, num_classes=0).state_dict()
    torch.save({'model': sd, 'epoch': 299}, tmp_path/'checkpoint-299.pth')
    enc = create_encoder('mocov3_vit_base', checkpoint=tmp_path/'checkpoint-299.pth', depth=1, num_classes=0)
    assert (enc.name, enc.weights) == ('mocov3_vit_base', 'checkpoint checkpoint-299.pth')
    assert torch.equal(enc.model.blocks[0].attn.qkv.weight, sd['blocks.0.attn.qkv.weight'])

def test_checkpoint_in_the_simmim_layout(tmp_path):
    "SimMIM's encoder keys: BEiT's, with one shared relative position bias, its index buffer, `norm` and a classifier"
    b = resolve_backbone('simmim_vit_base')
    torch.manual_seed(0)
    sd = timm.create_model(b.timm_name, depth=1, **b.model_kwargs).state_dict()
    sd['rel_pos_bias.relative_position_index'] = torch.zeros(197 * 197, dtype=torch.long)
    assert 'rel_pos_bias.relative_position_bias_table' in sd and 'norm.weight' in sd and 'fc_norm.weight' not in sd
    torch.save({'model': sd}, tmp_path/'simmim.pth')
    with pytest.warns(UserWarning, match='ignored 1 not in the model'):
        enc = create_encoder('simmim_vit_base', checkpoint=tmp_path/'simmim.pth', depth=1)
    table = 'rel_pos_bias.relative_position_bias_table'
    assert torch.equal(enc.model.state_dict()[table], sd[table])

def franca_like(depth=1, C=1024, grid=37):
    "A checkpoint laid out like the Franca release: DINOv2 keys, a SwiGLU MLP (w12, w3), 518 px position embedding"
    t = lambda *s: torch.randn(*s) * 0.02
    blk = lambda i: {f'blocks.{i}.{k}': v for k, v in {
        'norm1.weight': torch.ones(C), 'norm1.bias': t(C), 'attn.qkv.weight': t(3 * C, C), 'attn.qkv.bias': t(3 * C),
        'attn.proj.weight': t(C, C), 'attn.proj.bias': t(C), 'ls1.gamma': t(C), 'norm2.weight': torch.ones(C),
        'norm2.bias': t(C), 'mlp.w12.weight': t(2 * 2736, C), 'mlp.w12.bias': t(2 * 2736), 'mlp.w3.weight': t(C, 2736),
        'mlp.w3.bias': t(C), 'ls2.gamma': t(C)}.items()}
    sd = {'cls_token': t(1, 1, C), 'pos_embed': t(1, 1 + grid * grid, C), 'mask_token': t(1, C),
          'patch_embed.proj.weight': t(C, 3, 14, 14), 'patch_embed.proj.bias': t(C), 'norm.weight': torch.ones(C),
          'norm.bias': t(C)}
    for i in range(depth): sd.update(blk(i))
    return {'teacher': {**{f'backbone.{k}': v for k, v in sd.items()}, 'dino_head.last_layer.weight': t(8, C)}}

def test_checkpoint_in_the_franca_layout(tmp_path):
    "The Franca row's SwiGLU MLP takes the release's tensors; timm converts the keys and resamples 37 x 37 to 16 x 16"
    torch.manual_seed(0)
    ck = franca_like()
    torch.save(ck, tmp_path/'franca.pth')
    with pytest.warns(UserWarning, match='ignored 1 not in the model'):            # DINO's head
        enc = create_encoder('franca_vit_large', checkpoint=tmp_path/'franca.pth', depth=1)
    assert torch.equal(enc.model.blocks[0].mlp.fc1.weight, ck['teacher']['backbone.blocks.0.mlp.w12.weight'])
    assert enc.model.pos_embed.shape[1] == 1 + 16 * 16
    p, q = enc(torch.randn(1, 3, 224, 224))
    assert (p.shape, q.shape) == ((1, 256, 1024), (1, 1, 1024))
