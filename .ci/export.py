"""The library's export: `nbdev_export`, then each module's `__all__` wrapped within 120 columns.
  python .ci/export.py
nbdev wraps the names of `__all__` at 120 columns and then puts `__all__ = ` before the first line, so that line can
reach 130. This wraps the same names, in the same order, counting the prefix; nothing else in a module changes.
Run it wherever you would run `nbdev_export` (the notebooks' own `nbdev_export()` cells leave the long line, and the
test suite then says to run this)."""
import ast, re, subprocess, sys, textwrap
from pathlib import Path

root = Path(__file__).resolve().parents[1]
_all = re.compile(r'^__all__ = (\[[^\]]*\])$', re.M)


def wrap_all(text:str, width:int=120)->str:
    "`text` with its `__all__ = [...]` block wrapped within `width` columns, prefix included"
    m = _all.search(text)
    if not m: return text
    names = ast.literal_eval(m.group(1))
    lines = textwrap.wrap(str(names), width=width, initial_indent='__all__ = ', subsequent_indent=' ' * 11,
                          break_long_words=False)
    return text[:m.start()] + '\n'.join(lines) + text[m.end():]


if __name__ == '__main__':
    subprocess.run(['nbdev_export'], cwd=root, check=True)
    for f in sorted((root/'ep_probing').glob('*.py')):
        text = f.read_text(encoding='utf-8')
        if (new := wrap_all(text)) != text: f.write_text(new, encoding='utf-8')
    sys.exit(0)
