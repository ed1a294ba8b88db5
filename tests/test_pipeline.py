"run_probing end to end: streaming with augmentation, and clear errors for bad options."
import tempfile
from pathlib import Path
import pytest, timm, torch
from ep_probing.pipeline import run_probing

def tiny_vit():
    torch.manual_seed(0)
    return timm.models.VisionTransformer(img_size=28, patch_size=7, in_chans=1, embed_dim=32, depth=2, num_heads=2, num_classes=0)

def test_streaming_run_writes_results(tmp_path):
    learn = run_probing(tiny_vit(), probes='gap,ep:num_queries=4', epochs=2, bs=64, train_size=600, test_size=200,
                        stream=True, out=tmp_path/'o', progress=False)
    r = learn.results
    assert list(r.index) == ['gap', 'ep_num_queries=4'] and r.test_top1.between(0, 1).all()
    assert sorted(p.name for p in (tmp_path/'o').iterdir()) == ['attention.png', 'heads', 'log.csv', 'results.csv', 'results.json']

@pytest.mark.parametrize('kw, msg', [(dict(layers='7'), 'valid indices are 0..1'), (dict(probes='nope'), 'unknown probe'),
                                     (dict(data='/nonexistent'), 'neither'), (dict(probes=''), '--probes is empty')])
def test_bad_options(tmp_path, kw, msg):
    with pytest.raises(ValueError, match=msg):
        run_probing(tiny_vit(), epochs=1, train_size=200, test_size=100, out=tmp_path/'o', cache_dir=tmp_path/'c', progress=False, **kw)
