"The lint skips only nbdev's generated `__all__` block for line length, and still finds a long line elsewhere"
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
import lint


def test_long_line_outside_all_is_found_inside_is_not(tmp_path, monkeypatch):
    pkg = tmp_path/'pkg'; pkg.mkdir()
    names = ', '.join(f"'name_{i:03d}'" for i in range(12))
    (pkg/'m.py').write_text(f"__all__ = [{names}, 'x',\n           'y']\n\nx = 1\ny = '{'a' * 130}'\n")
    monkeypatch.setattr(lint, 'root', tmp_path)
    assert list(lint.all_block(pkg/'m.py')) == [1, 2]
    found = lint.long_lines('pkg')
    assert len(found) == 1 and ':5:' in found[0]


def test_module_without_all_has_no_block(tmp_path):
    (tmp_path/'m.py').write_text("x = 1\n")
    assert list(lint.all_block(tmp_path/'m.py')) == []


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
