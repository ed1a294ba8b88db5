"""The other commands with bad inputs: `ep_attention` (damaged heads, a decompression bomb), `ep_bench`, `ep_pretrain` and
`ep_experiment` (bad flag values). Each fails with one line `<command>: error: ...` and exit 2, never a traceback, and writes
nothing. Run in this process, as each console script does."""
import json, os, sys
import pytest, torch, timm
from PIL import Image
from safetensors.torch import save_file
from ep_probing.probes import create_probe
from ep_probing.heads import save_head
from ep_probing.viz import ep_attention
from ep_probing.bench import ep_bench
from ep_probing.mae import ep_pretrain
from ep_probing.cli import ep_experiment
from ep_probing.bench_train import ep_bench_train
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from console import run_cli   # noqa: E402




def one_line_error(cmd, code, err, contains):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and 'Traceback' not in err, err
    assert lines[0].startswith(f'{cmd}: error: ') and contains in lines[0], lines[0]


@pytest.fixture
def attn(tmp_path):
    "A tiny ViT asset, an image folder and a saved 'ep' head of the ViT's width"
    kw = dict(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2, num_classes=0)
    torch.manual_seed(0)
    save_file(timm.models.VisionTransformer(**kw).state_dict(), tmp_path/'vit.safetensors')
    (tmp_path/'vit.json').write_text(json.dumps(dict(model_kwargs=kw, mean=[0.5] * 3, std=[0.25] * 3)))
    (tmp_path/'imgs').mkdir()
    for i in range(3): Image.new('RGB', (48, 40), (60 * i, 90, 30)).save(tmp_path/'imgs'/f'im{i}.png')
    save_head(create_probe('ep', 32, 4, num_queries=4), tmp_path/'head', classes=list('abcd'))
    return tmp_path


def damage(tmp, how):
    "Damage the saved head `tmp/head` in one way"
    js, st = tmp/'head.json', tmp/'head.safetensors'
    if how == 'json garbage': js.write_bytes(b'\xff\xfe not json')
    elif how == 'json a list': js.write_text('[]')
    elif how == 'json without config': js.write_text('{"classes": ["a"]}')
    elif how == 'tensors garbage': st.write_bytes(b'\x00' * 64)
    elif how == 'other tensors': save_file({'w': torch.zeros(2)}, st)
    elif how == 'other widths': save_head(create_probe('ep', 64, 4, num_queries=4), tmp/'w64'); st.write_bytes((tmp/'w64.safetensors').read_bytes())


HEADS = [('json garbage', 'head.json is not JSON'), ('json a list', "no 'config'"), ('json without config', "no 'config'"),
         ('tensors garbage', 'cannot be read as tensors'), ('other tensors', "holds other tensors than the 'ep' probe's"),
         ('other widths', 'do not fit its config')]

@pytest.mark.parametrize('how, contains', HEADS, ids=[h for h, _ in HEADS])
def test_ep_attention_damaged_head(how, contains, attn, monkeypatch, capsys):
    damage(attn, how)
    code, out, err = run_cli(ep_attention, monkeypatch, capsys, [attn/'imgs', attn/'head', '--encoder', attn/'vit.json', '--out', attn/'o'])
    one_line_error('ep_attention', code, err, 'is not a head that save_head wrote')
    assert contains in err and 'save the head again' in err, err
    assert not (attn/'o').exists()


def test_ep_attention_decompression_bomb(attn, monkeypatch, capsys):
    "An image over PIL's pixel limit (lowered here so that a small image counts) is refused in one line, not decoded"
    monkeypatch.setattr(Image, 'MAX_IMAGE_PIXELS', 1000)              # the images are 48x40 = 1,920 pixels
    code, out, err = run_cli(ep_attention, monkeypatch, capsys, [attn/'imgs'/'im0.png', attn/'head', '--encoder', attn/'vit.json',
                                                                 '--out', attn/'o'])
    one_line_error('ep_attention', code, err, 'has more than 1,000 pixels')
    assert 'downscale it or remove it' in err and not (attn/'o').exists()


TOOLS = [
    (ep_bench, ['--steps', '0'], '--steps 0: must be an integer of at least 1'), (ep_bench, ['--batch_size', '0'], '--batch_size 0'),
    (ep_bench, ['--num_tokens', '0'], '--num_tokens 0'), (ep_bench, ['--dim', '-3'], '--dim -3'),
    (ep_bench, ['--warmup', '-1'], '--warmup -1'), (ep_bench, ['--ref', 'nosuch'], '--ref nosuch: not among the benchmarked probes'),
    (ep_bench, ['--probes', 'nosuch'], 'unknown probe'),
    (ep_bench, ['--precision', 'fp8'], "--precision fp8: use auto, bf16, fp16, none"),
    (ep_pretrain, ['--epochs', '0'], '--epochs 0: must be an integer of at least 1'), (ep_pretrain, ['--bs', '0'], '--bs 0'),
    (ep_pretrain, ['--lr', 'nan'], '--lr: a learning rate must be a finite positive'), (ep_pretrain, ['--mask_ratio', '1'], '--mask_ratio'),
    (ep_pretrain, ['--amp', 'fp8'], '--amp'),
    (ep_experiment, ['--seeds', 'abc'], '--seeds abc: give distinct non-negative integers'), (ep_experiment, ['--seeds', '0,0'], '--seeds 0,0'),
    (ep_experiment, ['--epochs', '0'], '--epochs 0'), (ep_experiment, ['--which', 'nope'], 'choose one of compare'),
    (ep_experiment, ['--blrs_from', 'nosuch.csv'], '--blrs_from nosuch.csv: no such file'),
    (ep_experiment, ['--which', 'layers', '--blrs_from', 'nosuch.csv'], '--blrs_from applies to compare and queries'),
    # the run's options of ep_experiment, ep_bench and ep_bench_train are RunConfig's: checked by it, before any work
    (ep_experiment, ['--blrs', '1e-3,abc'], "--blrs 1e-3,abc: a learning rate must be"),
    (ep_experiment, ['--opt', 'sgd'], '--opt sgd: use adamw, lars'),
    (ep_bench, ['--device', 'tpu'], '--device tpu: use cpu, cuda, cuda:N'),
    (ep_bench_train, ['--bs', '0'], '--bs 0: must be an integer of at least 1'),
]

@pytest.mark.parametrize('fn, args, contains', TOOLS, ids=[f"{f.__name__} {' '.join(a)}" for f, a, _ in TOOLS])
def test_bad_tool_flag(fn, args, contains, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    out_flag = dict(ep_bench=['--csv', tmp_path/'b.csv'], ep_pretrain=['--out', tmp_path/'vit'],
                    ep_experiment=['--out', tmp_path/'e.csv', '--cache_dir', tmp_path/'c'],
                    ep_bench_train=['--out', tmp_path/'s'])[fn.__name__]
    code, out, err = run_cli(fn, monkeypatch, capsys, [*out_flag, *args])
    one_line_error(fn.__name__, code, err, contains)
    assert out == '' and list(tmp_path.iterdir()) == [], (out, list(tmp_path.iterdir()))   # nothing run, nothing written
