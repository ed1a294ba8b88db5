"The lint finds a long line anywhere in the package, nbdev's `__all__` included, which `.ci/export.py` wraps"
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
import lint


def test_long_all_line_is_found_and_the_export_wraps_it(tmp_path, monkeypatch):
    "nbdev's `__all__` (names wrapped at 120, then the prefix) is over 120 columns; `wrap_all` keeps it within them"
    import ast, importlib.util
    spec = importlib.util.spec_from_file_location('export', Path(__file__).parents[1]/'.ci'/'export.py')
    export = importlib.util.module_from_spec(spec); spec.loader.exec_module(export)
    pkg = tmp_path/'pkg'; pkg.mkdir()
    names = ', '.join(f"'name_{i:03d}'" for i in range(12))
    text = f"__all__ = [{names}, 'x',\n           'y']\n\nx = 1\ny = '{'a' * 130}'\n"
    (pkg/'m.py').write_text(text)
    monkeypatch.setattr(lint, 'root', tmp_path)
    found = lint.long_lines('pkg')
    assert len(found) == 2 and ':1:' in found[0] and ':5:' in found[1], found
    wrapped = export.wrap_all(text)
    (pkg/'m.py').write_text(wrapped)
    found = lint.long_lines('pkg')
    assert len(found) == 1 and ':5:' in found[0], found                   # only the line nbdev did not write
    assert ast.literal_eval(wrapped.split('\n\nx = 1')[0].removeprefix('__all__ = ')) == [*eval(f"[{names}]"), 'x', 'y']
    assert wrapped.endswith(text[text.index('\n\nx = 1'):]) and export.wrap_all(wrapped) == wrapped


def test_dataclass_fields_do_not_count_other_lines_do():
    fields = ''.join(f"    f{i}:int={i} # option {i}\n" for i in range(40))
    assert lint.code_lines(f"@dataclass\nclass C:\n{fields}") == 2
    assert lint.code_lines(''.join(f"x{i} = {i} # a comment\n" for i in range(40))) == 40


def test_scripts_folder_is_linted(tmp_path, monkeypatch):
    assert lint.script_findings() == []                                   # the committed scripts are clean
    (tmp_path/'s').mkdir()
    (tmp_path/'s'/'a.py').write_text(f"import os\nx = '{'a' * 130}'\n")
    monkeypatch.setattr(lint, 'root', tmp_path)
    found = lint.script_findings('s')
    assert len(found) == 2 and any('F401' in f for f in found) and any('E501' in f for f in found), found
