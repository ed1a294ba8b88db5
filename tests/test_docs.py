"The docs check (.ci/docs_check.py) on tiny fake pages: it finds broken images, error outputs, missing figures and tables."
import base64, importlib.util, io, json
from pathlib import Path
import pytest

root = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location('docs_check', root/'.ci'/'docs_check.py')
dc = importlib.util.module_from_spec(spec); spec.loader.exec_module(dc)

def png_b64():
    "A real 20x10 PNG, base64"
    import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt
    fig = plt.figure(figsize=(2, 1), dpi=10); buf = io.BytesIO(); fig.savefig(buf, format='png'); plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()

def md(src): return {'cell_type': 'markdown', 'metadata': {}, 'source': src}
def code(src, *outputs): return {'cell_type': 'code', 'metadata': {}, 'execution_count': 1, 'source': src, 'outputs': list(outputs)}
FIGURE = {'output_type': 'display_data', 'metadata': {}, 'data': {'text/plain': '<Figure>'}}
TABLE = {'output_type': 'execute_result', 'execution_count': 1, 'metadata': {},
         'data': {'text/plain': 'a', 'text/html': '<table class="dataframe"><tr><th>a</th></tr><tr><td>1</td></tr></table>'}}
ERROR = {'output_type': 'error', 'ename': 'ValueError', 'evalue': 'bad value', 'traceback': [
    'Traceback (most recent call last)', '  File "<cell>", line 1', 'ValueError: bad value']}

def write_nb(path, cells, title):
    fm = {'cell_type': 'raw', 'metadata': {}, 'source': f'---\ntitle: {title}\noutput-file: {path.stem.split("_", 1)[-1]}.html\n---\n'}
    nb = {'cells': [fm] + cells, 'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5}
    path.write_text(json.dumps(nb)); return path

@pytest.fixture(scope='module')
def site(tmp_path_factory):
    "Three fake processed notebooks rendered with nbconvert: a good page, a broken one, an empty one"
    proc = tmp_path_factory.mktemp('proc')
    fig = dict(FIGURE, data={**FIGURE['data'], 'image/png': png_b64()})
    write_nb(proc/'00_good.ipynb', [md('# Good\nA figure and a table:'), code('plot()', fig), code('df', TABLE)], 'Good')
    write_nb(proc/'01_bad.ipynb', [md('A missing picture: ![a map](missing_map.png)'), code('1/0', ERROR),
                                   code('#| echo: false\nprint(x)', {'output_type': 'stream', 'name': 'stderr',
                                        'text': 'Traceback (most recent call last):\n  File "x"\nKeyError: 3\n'})], 'Bad')
    write_nb(proc/'02_plain.ipynb', [md('# Plain\nNo outputs at all.')], 'Plain')
    pages, fails = dc.render(proc)
    assert fails == []
    d = dc.browser()
    try: infos = {p.stem: dc.inspect_page(d, h) for p, h in pages.items()}
    finally: d.quit()
    return proc, pages, infos

def test_render_names_pages_like_nbdev(site):
    proc, pages, _ = site
    assert sorted(h.name for h in pages.values()) == ['bad.html', 'good.html', 'plain.html']
    assert all(h.parent == proc for h in pages.values())
    html = (proc/'bad.html').read_text()
    assert 'echo: false' not in html and '<h1' in (proc/'plain.html').read_text()   # directives dropped, title from frontmatter

def test_good_page_passes(site):
    _, _, infos = site
    assert infos['00_good']['tables'] == 1 and any(i['ok'] and i['inOutput'] for i in infos['00_good']['imgs'])
    assert dc.page_problems(infos['00_good'], {'figure', 'table'}) == []

def test_broken_image_and_error_outputs_fail(site):
    proc, _, infos = site
    probs = dc.page_problems(infos['01_bad'])
    assert any(p.startswith("broken image 'missing_map.png'") for p in probs), probs
    assert any('ValueError: bad value' in p for p in probs), probs                 # the error output cell
    assert any('KeyError: 3' in p for p in probs), probs                           # a traceback printed on stderr
    stored = dc.stored_errors(json.loads((proc/'01_bad.ipynb').read_text()))
    assert stored == [(2, 'ValueError: bad value'), (3, 'a traceback in stderr')]

def test_key_page_without_figure_or_table_fails(site):
    _, _, infos = site
    assert dc.page_problems(infos['02_plain'], {'figure', 'table'}) == [
        'no figure (no loaded image in an output cell or gallery)', 'no table in an output cell']

def test_attention_page_falls_back_to_a_page_with_a_figure(site):
    proc, pages, _ = site
    assert dc.attention_page(pages) == proc/'00_good.ipynb'

def test_layout_problems(tmp_path):
    nbs, lib = tmp_path/'nbs', tmp_path/'ep_probing'
    nbs.mkdir(); lib.mkdir()
    for n in ['index', '00_core', '13_fashion', '14_new', '_scratch']: (nbs/f'{n}.ipynb').write_text('{}')
    for m in ['__init__', '_modidx', 'core', 'viz']: (lib/f'{m}.py').write_text('')
    (nbs/'sidebar.yml').write_text('website:\n  sidebar:\n    contents:\n      - index.ipynb\n'
                                   '      - section: A\n        contents: [00_core.ipynb, 05_later.ipynb]\n'
                                   '      - section: B\n        contents: 13_*.ipynb\n      - api.ipynb\n')
    assert dc.layout_problems(nbs, lib) == ['nbs/14_new.ipynb: not in nbs/sidebar.yml (add it to its section)',
                                            'nbs/api.ipynb: missing (the API page of the sidebar)']
    write_nb(nbs/'api.ipynb', [md('| `ep_probing.core` | [Core](core.html) |')], 'API')
    assert dc.layout_problems(nbs, lib)[1:] == ['api page: module `ep_probing.viz` is not listed in nbs/api.ipynb']
    assert dc.missing_from_branch(nbs) == ['05_later.ipynb']

def test_repo_sidebar_lists_every_notebook_and_module():
    assert dc.layout_problems() == []

def test_site_config_problems(tmp_path):
    assert dc.site_config_problems(tmp_path)[0].startswith('_proc/_quarto.yml: missing or not YAML')
    (tmp_path/'_quarto.yml').write_text('project:\n  type: website\nmetadata-files: [nbdev.yml, sidebar.yml]\n')
    (tmp_path/'nbdev.yml').write_text('website:\n  title: x\n')
    probs = dc.site_config_problems(tmp_path)
    assert len(probs) == 1 and probs[0].startswith('_proc/sidebar.yml (a metadata-file of _quarto.yml): missing')
    (tmp_path/'sidebar.yml').write_text((root/'nbs'/'sidebar.yml').read_text())
    assert dc.site_config_problems(tmp_path) == []

# --- what a reader sees: one planted page per defect kind, each must fail; a clean page must pass -----------------
def stream(text, name='stdout'): return {'output_type': 'stream', 'name': name, 'text': text}
def markdown_out(text): return {'output_type': 'display_data', 'metadata': {}, 'data': {'text/markdown': text, 'text/plain': ''}}
PLANTED = {   # page stem -> (cells, the start of the one problem the check must report)
    'raw_sig': ([code('show_doc(f)', markdown_out('### f\n\n```python\nf(x:[`Tensor`](https://pytorch.org/docs/tensors.html))\n```\n'))],
                "raw link markup: '[`Tensor`](https://pytorch.org/docs/tensors.html)"),
    'raw_md': ([md('A comment that names a symbol: see [fit](fit.html#fit) (`[`x`](fit.html)` in a code span)')],
               "raw link markup: "),
    'nested': ([md('Go to [[Cache](cache.html)](cache.html#cache) now.')], "nested link: '[Cache](cache.html#cache)'"),
    'dead': ([md('See [the cache](cache.html) and [the old page](no_such_page.html#x).')], "dead relative link 'no_such_page.html#x'"),
    'path': ([code('fit()', stream(f'{root}/ep_probing/fit.py:266: some message\n', 'stderr'))],
             f"build-machine path in an output: '{root}"),
    'warn': ([code('fit()', stream('fit.py:266: UserWarning: the vmap fallback is slow\n', 'stderr'))],
             "warning in an output: 'UserWarning: the vmap"),
    'selfcall': ([code('show_doc(P.size)', markdown_out('### P.size\n\n>      P.size ()\n\n*Call self as a function.*\n'))],
                 "'Call self as a function.' shown"),
    'repeat': ([md('## fit_probes'), code('show_doc(fit_probes)', markdown_out('### fit_probes\n\n*Fit the heads*\n'))],
               "heading 'fit_probes' repeats the heading after it"),
    'dunder': ([code('show_doc(Run.__del__)', markdown_out('### Run.__del__\n\n*Close the run*\n'))],
               "documented dunder: heading 'Run.__del__'"),
    'clean': ([md('# Clean\nSee [the cache](cache.html#cache), [timm](https://github.com/huggingface/timm), `a[0](x)`.'),
               code('xs = [f][0](1)', stream('accuracy 0.91\n')),
               md('## Fitting'), code('show_doc(f)', markdown_out('### f\n\n```python\nf(x:Tensor)\n```\n')),
               code('show_doc(Run.__init__)', markdown_out('### Run.__init__\n\n*Start a run*\n'))], None),
}

@pytest.fixture(scope='module')
def planted(tmp_path_factory):
    "One rendered page per defect kind, plus a clean one and `cache.html` for links to point at"
    proc = tmp_path_factory.mktemp('planted')
    for i, (stem, (cells, _)) in enumerate(PLANTED.items()): write_nb(proc/f'{i:02d}_{stem}.ipynb', cells, stem)
    write_nb(proc/'90_cache.ipynb', [md('The cache page.')], 'Cache')
    pages, fails = dc.render(proc)
    assert fails == []
    d = dc.browser()
    try: infos = {h.stem: dc.inspect_page(d, h) for h in pages.values()}
    finally: d.quit()
    return {h.stem: dc.text_problems(infos[h.stem]) + dc.dead_links(infos[h.stem], h, pages.values()) for h in pages.values()}

@pytest.mark.parametrize('stem', [s for s in PLANTED if PLANTED[s][1]])
def test_planted_defect_fails(planted, stem):
    probs = planted[stem]
    assert any(p.startswith(PLANTED[stem][1]) for p in probs), probs

def test_clean_page_passes(planted):
    assert planted['clean'] == [] and planted['cache'] == []
