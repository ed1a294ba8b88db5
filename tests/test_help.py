"""`--help` and `-h` of the console commands that `ep_probing.cli.console` runs: the help of the real function, printed
without importing torch (`cli.light_parser` reads the source of ep_bench's and ep_pretrain's modules; ep_probe and
ep_experiment live in the torch-free `cli`). Each command runs in a fresh interpreter,
as its console script does; the notebook nbs/15_cli.ipynb checks that the text equals `anno_parser`'s."""
import os, subprocess, sys
from pathlib import Path
import pytest

root = Path(__file__).resolve().parents[1]
# the console script's body, then whether torch was imported, on stderr (atexit: `--help` ends in SystemExit)
wrapper = ("import atexit, sys; atexit.register(lambda: print('torch', 'torch' in sys.modules, file=sys.stderr)); "
           "import ep_probing.cli as c; sys.argv = sys.argv[1:]; getattr(c, sys.argv[0] + '_main')()")


@pytest.mark.parametrize('cmd, flag, opt', [('ep_probe', '--help', '--probes'), ('ep_probe', '-h', '--halving'),
                                            ('ep_bench', '--help', '--num_tokens'), ('ep_pretrain', '-h', '--mask_ratio'),
                                            ('ep_experiment', '--help', '--seeds')])
def test_help_without_torch(cmd, flag, opt):
    r = subprocess.run([sys.executable, '-c', wrapper, cmd, flag], capture_output=True, text=True, timeout=300,
                       env={**os.environ, 'PYTHONPATH': str(root)}, cwd=root)
    assert r.returncode == 0 and r.stderr == 'torch False\n', r.stderr
    assert r.stdout.startswith(f'usage: {cmd} ') and f'\n  {opt} ' in r.stdout, r.stdout


def test_bad_flag_before_help():
    "A bad value of a flag checked before torch loads is reported as before, even with --help"
    r = subprocess.run([sys.executable, '-c', wrapper, 'ep_bench', '--steps', '0', '--help'], capture_output=True,
                       text=True, timeout=300, env={**os.environ, 'PYTHONPATH': str(root)}, cwd=root)
    assert r.returncode == 2 and r.stderr.startswith('ep_bench: error: --steps 0'), r.stderr
