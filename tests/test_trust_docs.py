"Names and pages a researcher reads: the `lp` alias, the README's length and citation, the guides' claims."
import json, re
import pytest
from pathlib import Path
import torch
from ep_probing.probes import create_probe, TokenPool

root = Path(__file__).resolve().parent.parent

def test_lp_is_an_alias_of_cls():
    torch.manual_seed(0)
    p = create_probe('lp', 32, 10)
    assert isinstance(p.pool, TokenPool) and p.tokens == 'prefix'
    x, prefix = torch.randn(2, 16, 32), torch.randn(2, 1, 32)
    assert p(x, prefix).shape == (2, 10)
    q = create_probe(**p.config)                       # the config rebuilds it
    assert q.tokens == 'prefix' and q.config == p.config

def readme(): return (root/'README.md').read_text()

def test_readme_first_result_within_300_words():
    text = re.sub(r'<!--.*?-->', '', readme(), flags=re.S)
    first = min(i for i in (text.find('<table'), text.find('![')) if i >= 0)
    assert len(text[:first].split()) <= 300

def test_readme_installs_runs_and_cites_the_paper():
    text = readme()
    assert 'git clone https://github.com/ep-probing/ep_probing' in text and 'pip install -e .' in text
    assert 'https://arxiv.org/abs/2506.10178' in text and 'https://github.com/billpsomas/efficient-probing' in text
    assert re.search(r'@inproceedings\{psomas2026attention,.*?eprint\s*=\s*\{2506\.10178\}', text, re.S)
    assert 'comparable with the paper' not in text            # nothing shows the paper's leaderboard side by side
    dev = text[text.index('## Development'):]                 # the contributor command, after the user's part
    assert '\nbash tests/run.sh\n' in dev and 'tests/run.sh' not in text[:text.index('## Development')]

def pages():
    "Every page the docs site has: `nbs/NN_name.ipynb` -> `name.html`, `nbs/guides/x.ipynb` -> `guides/x.html`"
    nbs = root/'nbs'
    return {str(p.relative_to(nbs).with_name(re.sub(r'^\d+[a-z]?_', '', p.stem) + '.html'))
            for p in nbs.rglob('*.ipynb') if not any(o[0] in '_.' for o in p.relative_to(nbs).parts)}

def local_links(text, base=''):
    "The site pages that markdown `text` links to, relative to folder `base`, anchors dropped"
    import posixpath
    return {posixpath.normpath(posixpath.join(base, m)) for m in re.findall(r'\]\(([\w./-]+\.html)(?:#[\w-]*)?\)', text)
            if not m.startswith('http')}

def _readme_tool():
    import importlib.util
    spec = importlib.util.spec_from_file_location('readme_tool', root/'.ci'/'readme.py')
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

def test_readme_and_guides_link_only_to_pages_that_exist():
    have, site = pages(), _readme_tool().site_url()
    assert {'guides/which_probe.html', 'guides/reproduce.html', 'guides/faq.html'} <= have
    assert local_links(readme()) == set()                    # GitHub shows the README: no page of the site is relative
    on_site = set(re.findall(re.escape(site) + r'([\w./-]+\.html)', readme()))
    assert len(on_site) > 10 and on_site - have == set()
    assert site in readme()[:600]                              # the site's address in the first lines
    for g in (root/'nbs'/'guides').glob('*.ipynb'):
        text = ''.join(''.join(c['source']) for c in json.loads(g.read_text())['cells'] if c['cell_type'] == 'markdown')
        assert local_links(text, 'guides') - have == set(), g.name

def test_readme_links_resolve_on_github(tmp_path):
    "Every README link is absolute or a file of the repository; the check in the test command fails otherwise"
    tool = _readme_tool()
    assert tool.bad_links(readme()) == []
    (tmp_path/'fig.png').write_bytes(b'')
    planted = '[ok](fig.png) [ok](https://x.org/a.html) [page](faq.html) [gone](missing.png#x) <a href="api.html">'
    assert tool.bad_links(planted, tmp_path) == ['faq.html', 'missing.png#x', 'api.html']
    fixed = tool.absolute_links(planted, 'https://s.io/p/')
    assert '[page](https://s.io/p/faq.html)' in fixed and 'href="https://s.io/p/api.html"' in fixed
    assert '[ok](fig.png)' in fixed and tool.bad_links(fixed, tmp_path) == ['missing.png#x']

def test_guides_are_in_the_sidebar_between_tutorials_and_derivation():
    "The guides, then the evidence (a Results section), before the derivation; the flag list under Reference"
    import yaml
    contents = yaml.safe_load((root/'nbs'/'sidebar.yml').read_text())['website']['sidebar']['contents']
    sections = {s['section']: s['contents'] for s in contents if isinstance(s, dict)}
    assert list(sections) == ['Get started', 'Guides', 'Results', 'Derivation', 'Reference', 'Internals']
    assert sections['Results'] == ['13_experiments.ipynb', '12_viz.ipynb']
    assert {'15_cli.ipynb', '11a_bench_train.ipynb'} <= set(sections['Reference'])
    assert 'guides/encoders.ipynb' in sections['Guides']
    assert {'00a_dist.ipynb', '09c_trained.ipynb'} <= {n for c in sections.values() for n in c}

def test_derivation_page_has_its_figure_and_latex_steps():
    nb = json.loads((root/'nbs'/'02_derivation.ipynb').read_text())
    code = [''.join(c['source']) for c in nb['cells'] if c['cell_type'] == 'code']
    fig = [c for c in nb['cells'] if c['cell_type'] == 'code' and 'FancyBboxPatch(' in ''.join(c['source'])]
    assert len(fig) == 1 and any('image/png' in o.get('data', {}) for o in fig[0]['outputs'])    # drawn by a cell, stored
    assert any('test_fig_exists(ax)' in s for s in code)
    md = '\n'.join(''.join(c['source']) for c in nb['cells'] if c['cell_type'] == 'markdown')
    assert re.findall(r'`[^`\n]*(?:\^|sqrt)[^`\n]*`', md) == []          # math is LaTeX, not code spans
    assert '$$' in md and r'\tilde q_h' in md

def test_changelog_exists_and_the_readme_names_it():
    text = (root/'CHANGELOG.md').read_text()
    assert text.startswith('# Changelog') and '## Unreleased' in text and "'lp'" in text
    assert 'CHANGELOG.md' in readme()[readme().index('## Development'):]

def test_api_page_leads_with_eight_names_that_exist():
    import importlib
    cells = [''.join(c['source']) for c in json.loads((root/'nbs'/'api.ipynb').read_text())['cells']
             if c['cell_type'] == 'markdown']
    first = cells[1]                                           # cells[0] is the title
    assert first.startswith('## The eight names you need')
    eight = re.findall(r'^\| `(\w+)` \|', first, re.M)
    assert len(eight) == 8
    where = {'ep_probe': 'cli', 'run_probing': 'pipeline', 'results_table': 'pipeline', 'create_probe': 'probes',
             'create_encoder': 'encoders', 'ep_compare': 'leaderboard', 'ep_predict': 'trained', 'ready_head': 'trained'}
    assert set(eight) == set(where)                            # the head's use among them: the command and its loader
    for n in eight: assert callable(getattr(importlib.import_module(f'ep_probing.{where[n]}'), n))

RAW_KEYS = {'lp', 'gap', 'ep', 'ep_all', 'mhca', 'mqca', 'aim', 'dinovit', 'cae', 'clip', 'siglip', 'jepa', 'coca', 'cait',
            'abmilp', 'simpool', 'esimpool', 'dolg', 'cbam', 'knn'}   # probe keys; readers see EP_32, MHCA, LP [CLS], ...

def results_section(nb_name, api_heading):
    "The cells of `nbs/nb_name` between its title and `api_heading`, and whether the API follows them"
    cells = json.loads((root/'nbs'/nb_name).read_text())['cells']
    at = [i for i, c in enumerate(cells) if c['cell_type'] == 'markdown' and ''.join(c['source']).startswith(api_heading)]
    assert len(at) == 1, (nb_name, api_heading)
    return cells[:at[0]], cells[at[0]:]

@pytest.mark.parametrize('nb_name,api_heading', [('12_viz.ipynb', '## API'),
                                                 ('13_experiments.ipynb', '## How the experiments run')])
def test_results_come_before_the_api(nb_name, api_heading):
    before, after = results_section(nb_name, api_heading)
    src = lambda c: ''.join(c['source'])
    shown = [c for c in before if c['cell_type'] == 'code' and not src(c).startswith(('#| hide', '#| export', '#| default_exp'))]
    for c in shown:                     # what a reader sees first: committed results, no fixtures, tests or API docs
        assert not re.search(r'show_doc\(|test_eq|test_fail|test_close|\bassert\b|torch\.(rand|manual_seed)', src(c)), src(c)
    assert not any(src(c).startswith('#| export') and 'import' not in src(c) for c in before)   # no API defined up here
    md = '\n'.join(src(c) for c in before if c['cell_type'] == 'markdown')
    assert '## ' in md and ('data/viz/' in md or 'data/experiments/' in md)                  # results read from files
    assert any(src(c).startswith('show_doc(') for c in after)                               # the API follows
    for c in shown:                     # tables of the results name probes in display style, not by their keys
        for o in c.get('outputs', []):
            rows = ''.join(o.get('data', {}).get('text/plain', '')).splitlines()[1:]
            assert not {r.split()[0] for r in rows if r.split()} & RAW_KEYS, (src(c)[:80], rows[:3])
