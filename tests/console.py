"Run a console function in this process as its console script does, for the tests of bad inputs."
import sys
from fastcore.script import anno_parser


def run_cli(fn, monkeypatch, capsys, args):
    "Run the command `fn` with `args` as its console script does: `(exit code, stdout, stderr)`"
    monkeypatch.setattr(sys, 'argv', [fn.__name__, *map(str, args)])      # `user_errors` knows the command by argv[0]
    ns = anno_parser(fn).parse_args(list(map(str, args)))                  # as fastcore's `call_parse` does
    kw = {k: v for k, v in vars(ns).items() if v is not None and k not in ('pdb', 'xtra')}
    try: fn(**kw); code = 0
    except SystemExit as e: code = e.code
    out, err = capsys.readouterr()
    return code, out, err
