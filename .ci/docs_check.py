"""Check the docs site without Quarto: `nbdev_proc_nbs`, an HTML render of every processed notebook with
`jupyter nbconvert`, and the pages opened in headless Chromium.

Quarto cannot be installed on our machines, so this is the closest check of what `nbdev_docs` publishes:
1. `nbdev_proc_nbs` processes every notebook into `_proc/` (nbdev's own step before Quarto; it runs the
   export, import and `show_doc` cells of each notebook from the repository root, like `nbdev_docs`).
   nbdev calls its Quarto installer first when `quarto` is not on PATH (which would run
   `pip install -e .`), so a stub `quarto` that only exits 1 is put on PATH for that one command.
2. Every processed notebook renders to HTML with `jupyter nbconvert --to html`, next to it in `_proc/`
   under its page name (`00_core.ipynb` -> `core.html`, nbdev's `output-file`). Nothing is executed: like
   the site, the pages show the outputs stored in the notebooks.
3. Headless Chromium opens every page: no broken image, no error output. The index page must show a
   table and the attention-map page (`12_viz`) a figure; both, the guides and the experiments page are
   screenshotted to `--screenshots`.
   What a reader sees must be clean: no raw link markup (`[name](url)` shown as text), no nested links, no
   relative link to a page or file the site lacks, no build-machine path or library warning in an output, no
   "Call self as a function." (the docstring show_doc gives a property that has none), no documented dunder
   (but `__init__`), no heading that only repeats the heading after it.
Besides, every notebook in nbs/ must be listed in nbs/sidebar.yml and every module on the API page.

    python .ci/docs_check.py [--screenshots DIR] [--reuse]
It prints one summary line and exits 1 on any failure, each failure naming the page and the problem.
"""
import argparse, json, os, re, shutil, subprocess, sys, tempfile, time
from pathlib import Path

root = Path(__file__).resolve().parent.parent
NBS, PROC = root/'nbs', root/'_proc'
# page stem -> what it must show: 'table' (a table in an output cell), 'figure' (a loaded image in an output cell)
KEY_PAGES = {'index': {'table', 'figure'}, '12_viz': {'figure'}}
# screenshotted too with --screenshots, for a reader's look: the guides and the experiments page
SHOT_PAGES = ('guides/which_probe', 'guides/reproduce', 'guides/faq', '13_experiments')
CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-quic',
                  '--no-first-run', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage',
                  '--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost',   # offline: CDN scripts fail at once
                  '--window-size=1280,1600']

def notebooks(nbs=NBS):
    "The notebooks nbdev documents: every `.ipynb` under `nbs`, except names or folders starting with `_` or `.`"
    return sorted(p for p in nbs.rglob('*.ipynb') if not any(o[0] in '_.' for o in p.relative_to(nbs).parts))

def page_name(nb):
    "The page nbdev gives a processed notebook: its frontmatter's `output-file`, else the file stem"
    for c in nb['cells'][:1]:
        m = re.search(r'^output-file:\s*(\S+)\s*$', ''.join(c['source']), re.M)
        if c['cell_type'] == 'raw' and m: return m.group(1)
    return None

# --- 1. nbdev_proc_nbs ---------------------------------------------------------------------------------
def nb_title(path):
    "The title nbdev gives notebook `path`: its first `# ` heading"
    for c in json.loads(Path(path).read_text()).get('cells', []):
        m = re.search(r'^#\s+(.+?)\s*$', ''.join(c['source']), re.M) if c['cell_type'] == 'markdown' else None
        if m: return m.group(1)

def run_proc_nbs(skip=()):
    "One `nbdev_proc_nbs` run from the repository root, skipping notebook names `skip`; the finished process"
    env = dict(os.environ)
    args = ['--skip_file_re', '^[_.]|^(' + '|'.join(map(re.escape, skip)) + ')$'] if skip else []
    with tempfile.TemporaryDirectory() as stub:
        if not shutil.which('quarto'):
            q = Path(stub)/'quarto'
            q.write_text('#!/bin/sh\necho "quarto stub (.ci/docs_check.py): Quarto is not installed here" >&2\nexit 1\n')
            q.chmod(0o755); env['PATH'] = f"{stub}{os.pathsep}{env['PATH']}"
        exe = shutil.which('nbdev_proc_nbs') or str(Path(sys.executable).parent/'nbdev_proc_nbs')   # the console script
        return subprocess.run([exe, *args],
                              cwd=root, env=env, capture_output=True, text=True)

def proc_nbs(proc=PROC):
    "Run `nbdev_proc_nbs` into an empty `_proc/`; a list of failures, one per failing notebook"
    if proc.exists(): shutil.rmtree(proc)
    made_yml = not (NBS/'nbdev.yml').exists()
    by_title = {nb_title(p): p for p in notebooks()}
    fails, skip = [], []
    while True:                        # nbdev stops at the first failing notebook: skip it and go on (cached work is kept)
        r = run_proc_nbs(skip)
        if r.returncode == 0: break
        out = r.stdout + r.stderr
        where = re.findall(r'^Exception: Error in notebook: (.*?) in cell (\d+)', out, re.M)
        why = [l for l in out.splitlines() if re.match(r'^\w+(Error|Exception): ', l) and not l.startswith('Exception: Error in')]
        nb = by_title.get(where[0][0]) if where else None
        if nb is None or nb.name in skip:
            fails.append(f"nbdev_proc_nbs failed (exit {r.returncode}):\n" + '\n'.join(out.splitlines()[-15:])); break
        skip.append(nb.name)
        fails.append(f"{nb.relative_to(root)}: nbdev_proc_nbs fails in cell {where[0][1]} of the processed notebook: "
                     f"{why[-1] if why else '?'} (it runs import, export and show_doc cells from the repo root)")
    if made_yml and (NBS/'nbdev.yml').exists(): (NBS/'nbdev.yml').unlink()   # nbdev writes it for Quarto; keep the tree clean
    return fails

# --- 2. nbconvert ----------------------------------------------------------------------------------------
def quarto_like(nb):
    "What Quarto does to a processed notebook before its HTML, the small part nbconvert lacks: the frontmatter as title"
    "and summary, `#|` directive lines dropped, `echo: false` / `output: false` cells without source / outputs"
    cells = []
    for c in nb['cells']:
        src = ''.join(c['source'])
        if c['cell_type'] == 'raw' and src.startswith('---'):
            import yaml
            fm = yaml.safe_load(src.strip().strip('-')) or {}
            md = (f"# {fm['title']}\n\n" if 'title' in fm else '') + (f"> {fm['description']}\n" if 'description' in fm else '')
            if md: cells.append({'cell_type': 'markdown', 'metadata': {}, 'source': md, 'id': c.get('id', 'fm')})
            continue
        if c['cell_type'] == 'code':
            dirs = dict(re.findall(r'^#\|\s*([\w-]+)\s*:?\s*(.*?)\s*$', src, re.M))
            c = {k: v for k, v in c.items() if k != 'has_sd'}         # nbdev's marker is not valid nbformat
            c['source'] = '' if dirs.get('echo') == 'false' else re.sub(r'^#\|.*\n?', '', src, flags=re.M).strip('\n')
            if dirs.get('output') == 'false': c['outputs'] = []
            for o in c['outputs']:                            # show_doc's pandoc link attributes: `[source](url){target=...}`
                if 'text/markdown' in o.get('data', {}):
                    md = ''.join(o['data']['text/markdown'])
                    o['data'] = dict(o['data'], **{'text/markdown': re.sub(r'(\]\([^)]*\))\{[^}]*\}', r'\1', md)})
            if not c['source'] and not c['outputs']: continue
            c['metadata'] = dict(c.get('metadata', {}), tags=['remove_input'] if not c['source'] else [])
        cells.append(c)
    return dict(nb, cells=cells)

def nbconvert(nbs, out):
    "Run `jupyter nbconvert --to html` (no prompts; input of `remove_input` cells hidden) on notebooks `nbs` into `out`"
    r = subprocess.run([sys.executable, '-m', 'jupyter', 'nbconvert', '--to', 'html', '--log-level', 'CRITICAL',
                        '--HTMLExporter.exclude_input_prompt=True', '--HTMLExporter.exclude_output_prompt=True',
                        '--TagRemovePreprocessor.enabled=True', '--TagRemovePreprocessor.remove_input_tags=remove_input',
                        '--output-dir', str(out), *map(str, nbs)], capture_output=True, text=True)
    return r.returncode, (r.stderr.strip().splitlines() or ['?'])[-1]

def render(proc=PROC):
    "Render every processed notebook to `<page>.html` beside it; ({notebook path: html path}, failures)"
    nbs = sorted(p for p in proc.rglob('*.ipynb') if '.ipynb_checkpoints' not in p.parts)
    pages, fails = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for d in {p.parent for p in nbs}:                      # one nbconvert run per folder (usually one)
            group, prepped = [p for p in nbs if p.parent == d], []
            for p in group:
                q = tmp/'in'/p.name; q.parent.mkdir(exist_ok=True); prepped.append(q)
                try: q.write_text(json.dumps(quarto_like(json.loads(p.read_text()))))
                except Exception as e: fails.append(f"{p.relative_to(proc)}: unreadable processed notebook: {e!r}"); prepped.pop()
            rc, why = nbconvert(prepped, tmp/'out')
            if rc:                                            # find the notebooks that fail, one at a time
                for q in prepped:
                    rc1, why1 = nbconvert([q], tmp/'out')
                    if rc1: fails.append(f"{(d/q.name).relative_to(proc)}: jupyter nbconvert --to html failed: {why1}")
            for p in group:
                made = tmp/'out'/(p.stem + '.html')
                if not made.exists(): continue
                html = d/(page_name(json.loads(p.read_text())) or made.name)
                shutil.move(made, html); pages[p] = html
    return pages, fails

def stored_errors(nb):
    "Error outputs stored in notebook `nb`: [(cell index, text)]"
    res = []
    for i, c in enumerate(nb['cells']):
        for o in c.get('outputs', []):
            if o['output_type'] == 'error': res.append((i, f"{o.get('ename')}: {o.get('evalue')}"))
            elif o['output_type'] == 'stream' and 'Traceback (most recent call last)' in ''.join(o.get('text', '')):
                res.append((i, 'a traceback in ' + o.get('name', 'stream')))
    return res

# --- 3. the pages in headless Chromium ---------------------------------------------------------------------
PAGE_JS = r"""
const out = '.jp-OutputArea-output, .output_area, .output_subarea';
const imgs = [...document.images].map(i => ({src: (i.getAttribute('src') || '').slice(0, 80),
    ok: i.complete && i.naturalWidth > 0, inOutput: !!i.closest(out), width: i.naturalWidth}));
const tb = /Traceback \(most recent call last\)|^\w*(Error|Exception)\b.*Traceback/m;  // not warnings on stderr
const errors = [...document.querySelectorAll('.output_error')].map(e => e.innerText)
    .concat([...document.querySelectorAll(out)].map(e => e.innerText).filter(t => tb.test(t)));
// what a reader sees: the text of markdown cells and outputs (not code input, which may index like `a[0](x)`)
const shown = [...document.querySelectorAll('.jp-RenderedMarkdown, .text_cell_render, ' + out)]
    .filter(e => !e.parentElement.closest('.jp-RenderedMarkdown, .text_cell_render, ' + out));
const outputs = [...document.querySelectorAll(out)].filter(e => !e.parentElement.closest(out)).map(e => e.innerText);
// a link inside brackets: `[` <a>..</a> `](url)`, what Markdown makes of `[[a](x)](y)` (links cannot nest)
const nested = [...document.querySelectorAll('a')].filter(a => {
    const p = a.previousSibling, n = a.nextSibling;
    return p && n && p.nodeType === 3 && n.nodeType === 3 && /\[\s*$/.test(p.textContent) && /^\s*\]\(/.test(n.textContent);
}).map(a => '[' + a.innerText + '](' + a.nextSibling.textContent.replace(/^\s*\]\(/, '').split(')')[0] + ')');
// headings as read; `Cls.__del__` may render as Cls.<strong>del</strong>: spelled back as a dunder
const heads = [...document.querySelectorAll('h1, h2, h3, h4')].map(h => { const c = h.cloneNode(true);
    c.querySelectorAll('strong').forEach(s => { if (/\.$/.test(s.previousSibling?.textContent || '')) s.textContent = '__' + s.textContent + '__'; });
    return c.innerText.replace(/[\u00b6#]\s*$/, '').trim(); });
return {title: document.title, imgs: imgs, errors: errors, heads: heads,
        tables: [...document.querySelectorAll('table')].filter(t => t.closest(out)).length,
        text: shown.map(e => e.innerText), outputs: outputs, nested: nested,
        hrefs: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')),
        height: Math.max(document.body.scrollHeight, document.documentElement.scrollHeight)};
"""

# What a reader must never see. Raw link markup: `[text](target)` shown as text (nbdev links backticked names even
# inside a signature's code block, where Markdown does not apply), with a target that looks like a link.
RAW_LINK = re.compile(r'\[[^\[\]\n]{1,200}\]\((?:https?://|\.{1,2}/|#|[\w./-]+\.(?:html|ipynb|md)\b)[^)\s]*\)')
# a path on the machine that built the page: this repository, a home or work folder, site-packages, a temp folder
MACHINE_PATH = re.compile('|'.join([re.escape(str(root)), r'(?<![\w.~])/(?:home|work|root|Users|tmp|mnt|opt|private|var/folders)/[\w.-]+',
                                    r'site-packages/', r'dist-packages/', r'/usr/lib/python', r'[A-Z]:\\Users\\']))
WARNING = re.compile(r'\b[A-Z]\w*Warning\b(?::|\s*\(|$)|\bwarnings\.warn\(|please file us an issue', re.M)
SELF_CALL = 'Call self as a function.'

def snip(text, m, after=0):
    "The match `m` in `text` (and `after` characters after it), on one line, at most 120 characters"
    return ' '.join(text[m.start():m.end() + after].split())[:120]

def text_problems(info):
    "Defects in what the reader sees: raw link markup, nested links, build-machine paths, warnings, "
    "and the placeholder docstring of properties"
    res = []
    for t in info.get('text', []):
        res += [f"raw link markup: {snip(t, m)!r}" for m in RAW_LINK.finditer(t)]
        if SELF_CALL in t: res.append(f"{SELF_CALL!r} shown (give the property a docstring or hide it from show_doc)")
    res += [f"nested link: {n!r} (a link inside a link's text; Markdown shows the outer one raw)" for n in info.get('nested', [])]
    norm = lambda h: re.sub(r'[`\s]|\(\)$', '', h)
    hs = info.get('heads', [])
    res += [f"heading {a!r} repeats the heading after it" for a, b in zip(hs, hs[1:]) if a and norm(a) == norm(b)]
    res += [f"documented dunder: heading {h!r}" for h in hs if re.search(r'\b__(?!init__)\w+__\b', h)]
    for t in info.get('outputs', []):
        res += [f"build-machine path in an output: {snip(t, m, 40)!r}" for m in MACHINE_PATH.finditer(t)]
        res += [f"warning in an output: {snip(t, m, 60)!r}" for m in WARNING.finditer(t)]
    return list(dict.fromkeys(res))

def dead_links(info, html, pages):
    "Relative links of page `html` that reach no page (`pages`: the site's page files) nor a file beside the pages"
    names, res = {Path(p).resolve() for p in pages}, []
    for h in dict.fromkeys(info.get('hrefs', [])):
        if not h or h.startswith('#') or re.match(r'^[a-zA-Z][\w+.-]*:', h): continue   # anchors, http:, mailto:, data:
        rel = h.split('#')[0].split('?')[0]
        if not rel: continue
        t = (Path(html).parent/rel).resolve()
        alts = {t, t.with_suffix('.html')} if t.suffix in ('.ipynb', '.qmd', '.md') else {t}   # Quarto renames sources
        if not (alts & names) and not any(a.is_file() and a.suffix not in ('.ipynb', '.qmd', '.md') for a in alts):
            res.append(f"dead relative link {h!r}")
    return res

def page_problems(info, needs=()):
    "Problems of one page from what `PAGE_JS` found in it; `needs` is a subset of {'table', 'figure'}"
    res = [f"broken image {i['src']!r}" for i in info['imgs'] if not i['ok']]
    res += [f"error output: {e.strip().splitlines()[-1][:160] if e.strip() else '(empty)'}" for e in dict.fromkeys(info['errors'])]
    # a figure: a loaded image in an output cell, or a gallery PNG (>= 200 px wide) the page shows from its markdown
    if 'figure' in needs and not any(i['ok'] and (i['inOutput'] or i.get('width', 0) >= 200) for i in info['imgs']): res.append('no figure (no loaded image in an output cell or gallery)')
    if 'table' in needs and not info['tables']: res.append('no table in an output cell')
    return res

def browser():
    "A headless Chromium driven through chromedriver, with a fresh profile"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    for f in CHROMIUM_FLAGS: opts.add_argument(f)
    opts.add_argument('--user-data-dir=' + tempfile.mkdtemp(prefix='docs_check_chromium_'))
    for b in ('/usr/bin/chromium', '/usr/lib/chromium/chromium'):
        if Path(b).exists(): opts.binary_location = b; break
    drv = shutil.which('chromedriver') or '/usr/lib/chromium/chromedriver'
    d = webdriver.Chrome(options=opts, service=Service(executable_path=drv))
    d.set_page_load_timeout(60)
    return d

def inspect_page(d, html):
    "Open `html` in driver `d` and return what `PAGE_JS` finds once its images settled"
    d.get(html.resolve().as_uri())
    for _ in range(50):                                   # images decode asynchronously: wait until all settled
        if d.execute_script("return [...document.images].every(i => i.complete)"): break
        time.sleep(0.1)
    return d.execute_script(PAGE_JS)

def screenshot(d, html, dest, max_height=12000):
    "Save a full-page PNG of `html` (at most `max_height` px tall) to `dest`"
    inspect_page(d, html)                                 # loads it and waits for the images
    h = min(max_height, d.execute_script("return document.documentElement.scrollHeight"))
    d.set_window_size(1280, max(h, 800)); time.sleep(0.3)
    d.save_screenshot(str(dest)); d.set_window_size(1280, 1600)

# --- site layout -----------------------------------------------------------------------------------------
def sidebar_entries(path=NBS/'sidebar.yml'):
    "The notebook names and globs listed in a Quarto sidebar file"
    import yaml
    res = []
    def walk(o):
        if isinstance(o, str): res.append(o)
        elif isinstance(o, list): [walk(x) for x in o]
        elif isinstance(o, dict):
            for k in ('contents', 'href', 'file'): walk(o.get(k, []))
    walk(yaml.safe_load(path.read_text())['website']['sidebar'])
    return res

def layout_problems(nbs=NBS, lib=root/'ep_probing'):
    "Notebooks missing from the sidebar, modules missing from the API page"
    import fnmatch
    entries, res = sidebar_entries(nbs/'sidebar.yml'), []
    for p in notebooks(nbs):
        rel = str(p.relative_to(nbs))
        if not any(fnmatch.fnmatch(rel, e) for e in entries): res.append(f"nbs/{rel}: not in nbs/sidebar.yml (add it to its section)")
    api = nbs/'api.ipynb'
    if not api.exists(): return res + ['nbs/api.ipynb: missing (the API page of the sidebar)']
    text = ''.join(''.join(c['source']) for c in json.loads(api.read_text())['cells'])
    for m in sorted(lib.glob('*.py')):
        if m.stem.startswith('_'): continue
        if f'ep_probing.{m.stem}`' not in text: res.append(f"api page: module `ep_probing.{m.stem}` is not listed in nbs/api.ipynb")
    return res

def missing_from_branch(nbs=NBS):
    "Sidebar notebooks (not globs) that do not exist here: tolerated, printed as a note"
    return [e for e in sidebar_entries(nbs/'sidebar.yml') if not any(c in e for c in '*?[') and not (nbs/e).exists()]

def site_config_problems(proc=PROC):
    "What Quarto would read besides the pages: `_quarto.yml` and its `metadata-files`, copied to `_proc/` and valid YAML"
    import yaml
    try: cfg = yaml.safe_load((proc/'_quarto.yml').read_text())
    except Exception as e: return [f"_proc/_quarto.yml: missing or not YAML ({e!r}); nbs/_quarto.yml must link to ../_quarto.yml"]
    res = []
    for f in cfg.get('metadata-files', []):
        try: yaml.safe_load((proc/f).read_text())
        except Exception as e: res.append(f"_proc/{f} (a metadata-file of _quarto.yml): missing or not YAML ({e!r})")
    return res

# --- main --------------------------------------------------------------------------------------------------
def attention_page(pages):
    "The processed notebook of the attention-map page: `12_viz`, else the first notebook that stores a figure"
    by_stem = {p.stem: p for p in pages}
    if '12_viz' in by_stem: return by_stem['12_viz']
    for p in pages:
        nb = json.loads(p.read_text())
        if any(k.startswith('image/') for c in nb['cells'] for o in c.get('outputs', []) for k in o.get('data', {})): return p
    return None

def main(screenshots=None, reuse=False):
    t0, fails, notes = time.time(), [], []
    fails += layout_problems()
    if miss := missing_from_branch(): notes.append(f"sidebar notebooks not on this branch (skipped): {', '.join(miss)}")
    pf = [] if reuse and PROC.exists() else proc_nbs()
    fails += pf; t1 = time.time()
    src = notebooks()
    for p in src:                                          # every notebook that exists is processed
        rel = p.relative_to(NBS)
        if not (PROC/rel).exists() and not any(f.startswith(f'nbs/{rel}:') for f in pf):
            fails.append(f"nbs/{rel}: nbdev_proc_nbs wrote no _proc/{rel}")
    fails += site_config_problems()
    pages, f = render() if PROC.exists() else ({}, [])
    fails += f; t2 = time.time()
    for p in pages:
        fails += [f"{pages[p].name} (cell {i}): stored error output {t}" for i, t in stored_errors(json.loads(p.read_text()))]
    key = {}
    if 'index' in {p.stem for p in pages}: key[next(p for p in pages if p.stem == 'index')] = ('index', KEY_PAGES['index'])
    att = attention_page(pages)
    if att is None: notes.append('no attention-map page yet: nbs/12_viz.ipynb is not on this branch and no notebook stores a figure')
    else: key[att] = ('attention', KEY_PAGES['12_viz'])
    # the site's pages: those rendered here, and those of sidebar notebooks that another branch adds (noted above)
    site = [*pages.values(), *(PROC/Path(e).with_name(re.sub(r'^\d+[a-z]?_', '', Path(e).stem) + '.html')
                               for e in missing_from_branch())]
    if pages:
        d = browser()
        try:
            for p, html in pages.items():
                info = inspect_page(d, html)
                fails += [f"{html.name}: {m}" for m in page_problems(info, key.get(p, ('', ()))[1])]
                fails += [f"{html.relative_to(PROC)}: {m}" for m in text_problems(info) + dead_links(info, html, site)]
            if screenshots:
                sd = Path(screenshots); sd.mkdir(parents=True, exist_ok=True)
                shots = {pages[p]: f"{role}_{pages[p].stem}" for p, (role, _) in key.items()}
                shots.update({pages[p]: str(pages[p].relative_to(PROC).with_suffix('')).replace('/', '_') for p in pages
                              if str(p.relative_to(PROC).with_suffix('')) in SHOT_PAGES})
                for html, stem in shots.items():
                    screenshot(d, html, sd/f"{stem}.png"); notes.append(f"screenshot {sd/(stem + '.png')}")
        finally: d.quit()
    for n in notes: print('note:', n)
    for m in fails: print('FAIL:', m)
    keys = ', '.join(pages[p].name for p in key) or 'none'
    print(f"docs check: {len(pages)} of {len(src)} notebooks processed and rendered, key pages: {keys}; "
          f"{len(fails)} problem(s) in {time.time()-t0:.0f} s (nbdev_proc_nbs {t1-t0:.0f} s, nbconvert {t2-t1:.0f} s, "
          f"Chromium {time.time()-t2:.0f} s)")
    return 1 if fails else 0

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--screenshots', help='folder for PNG screenshots of the index, attention-map, guide and experiments pages')
    ap.add_argument('--reuse', action='store_true', help='render the `_proc/` of an earlier run (no nbdev_proc_nbs)')
    a = ap.parse_args()
    sys.exit(main(a.screenshots, a.reuse))
