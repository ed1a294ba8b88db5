"""Issue 48 item 19: a command's error names the flag as the user typed it (`--layer 99`, `--encoder 12`), never a
Python spelling (`layers= 99`, `model=12`, `create the probe with dim=...`). Each command runs as its console script,
in a fresh process, and must fail with one line and exit code 2."""
import json, os, subprocess
from pathlib import Path
import pytest
from PIL import Image
from ep_probing.probes import create_probe
from ep_probing.heads import save_head

root = Path(__file__).resolve().parents[1]


def one_line(cmd:str, *args)->str:
    "The one error line of console script `cmd` run with `args` (exit code 2, no traceback)"
    r = subprocess.run([cmd, *map(str, args)], capture_output=True, text=True, timeout=600, cwd=root,
                       env={**os.environ, 'PYTHONPATH': str(root)})
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and 'Traceback' not in r.stderr, r.stderr
    assert lines[0].startswith(f'{cmd}: error: '), lines[0]
    return lines[0]


@pytest.fixture(scope='module')
def heads(tmp_path_factory):
    "An image, and saved 'ep' heads on the shipped `mae_fmnist` (6 blocks, width 192): right, too narrow, bad record"
    tmp = tmp_path_factory.mktemp('spelling')
    Image.new('L', (28, 28), 128).save(tmp/'img.png')
    meta = dict(classes=list('abcd'), encoder='mae_fmnist', layers=[5])
    save_head(create_probe('ep', 192, 4, num_queries=4), tmp/'h192', **meta)
    save_head(create_probe('ep', 32, 4, num_queries=4), tmp/'h32', **meta)
    save_head(create_probe('ep', 192, 4, num_queries=4), tmp/'h12', **meta)
    js = json.loads((tmp/'h12.json').read_text()); js['encoder'] = 12; (tmp/'h12.json').write_text(json.dumps(js))
    return tmp


def test_layer_out_of_range(heads):
    line = one_line('ep_predict', heads/'h192', heads/'img.png', '--layer', '99')
    assert '--layer 99 is out of range: this encoder has 6 blocks' in line and 'layers=' not in line, line


def test_layer_of_a_cnn(heads):
    line = one_line('ep_attention', heads/'img.png', heads/'h192', '--encoder', 'efficientnet_lite0_imagenet',
                    '--layer', '3', '--out', heads/'o')
    assert '--layer 3: EfficientNet is a CNN' in line and 'use --layer -1' in line and 'layers=' not in line, line
    assert not (heads/'o').exists()


def test_head_of_another_width(heads):
    line = one_line('ep_predict', heads/'h32', heads/'img.png')
    assert "'mae_fmnist' gives tokens of width 192 but the head reads width 32" in line and '--encoder' in line, line
    assert 'dim=' not in line and 'create the probe' not in line, line


def test_encoder_not_a_name(heads):
    line = one_line('ep_predict', heads/'h12', heads/'img.png')
    assert '--encoder 12: pass a short name' in line and 'model=' not in line, line


def test_ep_probe_layers_as_typed(tmp_path):
    line = one_line('ep_probe', '--layers', '0,99', '--epochs', '1', '--out', tmp_path/'o', '--cache_dir', tmp_path/'c')
    assert '--layers 0,99 is out of range' in line, line
