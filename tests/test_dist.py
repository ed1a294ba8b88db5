"""One home for ranks (issue 49 item 5) and the rank environment checked (issue 48 item 5): only `dist.py` asks for
the rank or world size; one process is rank 0; variables left in a shell are one line and exit code 2, never a
traceback; a rendezvous whose partners never come gives up in minutes, saying what it waited for."""
from pathlib import Path
import os, re, socket, subprocess, sys
import pytest
import ep_probing

pkg = Path(ep_probing.__file__).parent
TINY = ['--train_size', '300', '--test_size', '100', '--epochs', '1', '--probes', 'gap', '--blrs', '0.1']
asks = re.compile(r"rank_distrib|num_distrib|get_rank\(|get_world_size\(|environ\b.*\b(RANK|WORLD_SIZE|LOCAL_RANK)\b")


def test_ranks_are_asked_in_dist_alone():
    found = [f"{p.name}:{i}: {l.strip()}" for p in sorted(pkg.glob('*.py')) if p.name not in ('dist.py', '_modidx.py')
             for i, l in enumerate(p.read_text().splitlines(), 1) if asks.search(l)]
    assert found == [], found
    assert asks.search((pkg/'dist.py').read_text())                        # the pattern does find the asking


def ep_probe(tmp_path, env:dict, *args, prelude:str='', timeout:int=300):
    "Run `ep_probe` in a fresh process with `env` added: `(exit code, stdout, stderr)`"
    code = (f"import sys; sys.argv = ['ep_probe', *sys.argv[1:]]\n{prelude}\n"
            "from ep_probing.cli import ep_probe_main; ep_probe_main()")
    clean = {k: v for k, v in os.environ.items() if k not in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR',
                                                              'MASTER_PORT')}
    r = subprocess.run([sys.executable, '-c', code, *TINY, '--device', 'cpu', '--out', str(tmp_path/'o'),
                        '--cache_dir', str(tmp_path/'c'), *args], env={**clean, **env}, capture_output=True,
                       text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


@pytest.mark.parametrize('env, msg', [
    (dict(RANK='1'), 'RANK=1 is set without WORLD_SIZE; run under torchrun (it sets them) or unset them'),
    (dict(WORLD_SIZE='2', RANK='0'), 'WORLD_SIZE=2 is set without MASTER_ADDR and MASTER_PORT, so no other process '
                                     'can join; run under torchrun (it sets them) or unset them'),
    (dict(WORLD_SIZE='abc'), "WORLD_SIZE='abc' in the environment is not a rank count or index; run under "
                             'torchrun (it sets them) or unset them'),
])
def test_rank_variables_left_in_the_shell(tmp_path, env, msg):
    code, out, err = ep_probe(tmp_path, env)
    assert code == 2 and err.splitlines() == [f"ep_probe: error: {msg} (--debug shows the traceback)"], err
    assert 'Traceback' not in err + out and not (tmp_path/'c').exists() and not (tmp_path/'o').exists()


def test_one_process_is_rank_0(tmp_path):
    "`RANK=1` left beside `WORLD_SIZE=1`: the one process writes its results (it wrote nothing, with exit code 0)"
    code, out, err = ep_probe(tmp_path, dict(WORLD_SIZE='1', RANK='1', LOCAL_RANK='1'))
    assert code == 0 and 'Traceback' not in err, err
    assert (tmp_path/'o'/'results.csv').exists() and 'ep_probe: mae_fmnist' in out, out


def test_rendezvous_gives_up_saying_what_it_waited_for(tmp_path):
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); port = str(s.getsockname()[1])
    env = dict(WORLD_SIZE='2', RANK='0', LOCAL_RANK='0', MASTER_ADDR='127.0.0.1', MASTER_PORT=port)
    short = "import datetime, ep_probing.dist as d; d.rendezvous_timeout = datetime.timedelta(seconds=2)  # 600 s"
    code, out, err = ep_probe(tmp_path, env, prelude=short)
    at = f"127.0.0.1:{port}"
    assert err.splitlines() == [
        f"waiting up to 0.0333333 min for the run's 2 processes to join at {at}",
        f"ep_probe: error: the run's 2 processes (WORLD_SIZE=2) did not all join at {at} within 0.0333333 min; "
        "start them together with torchrun, or unset WORLD_SIZE and RANK (--debug shows the traceback)"], err
    assert code == 2 and 'Traceback' not in err + out and not list((tmp_path/'o').glob('*.csv'))
