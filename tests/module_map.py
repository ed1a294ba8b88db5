"The module map of `ep_probing`: lines per module and who imports whom, module-level and function-level apart"
# Read with `ast`, never imported: `python tests/module_map.py [--json] [PACKAGE_DIR]`.
# Module level: an import that runs when the module loads (top level, `if`/`try` blocks, class bodies).
# Function level: an import inside a function, run only when the function is called.
import ast, json, sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]/'ep_probing'
skip = {'_modidx'}                                                   # nbdev's index: data, no imports

def _targets(node:ast.AST, mod:str, mods:set)->set:
    "The `ep_probing` modules an `import`/`from ... import` node names, seen from module `mod`"
    if isinstance(node, ast.Import):
        return {a.name.split('.')[1] for a in node.names if a.name.startswith('ep_probing.')} & mods
    base = node.module or ''
    if node.level == 0:
        if base == 'ep_probing': return {a.name for a in node.names} & mods      # `from ep_probing import zoo`
        return {base.split('.')[1]} & mods if base.startswith('ep_probing.') else set()
    if node.level > 1: return set()
    if base: return {base.split('.')[0]} & mods                                  # `from .core import x`
    return {a.name for a in node.names} & mods                                   # `from . import shards`

def _walk(node:ast.AST, in_func:bool=False):
    "Yield `(import node, inside a function?)` for every import under `node`"
    for c in ast.iter_child_nodes(node):
        if isinstance(c, (ast.Import, ast.ImportFrom)): yield c, in_func
        yield from _walk(c, in_func or isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

def module_map(pkg:Path=root)->dict:
    "`{module: {'lines': n, 'module_level': [...], 'function_level': [...]}}` of the package in `pkg`"
    files = {p.stem: p for p in sorted(pkg.glob('*.py')) if p.stem not in skip}
    mods, out = {*files} - {'__init__'}, {}
    for m, p in files.items():
        src = p.read_text(encoding='utf-8')
        top, fn = set(), set()
        for node, in_func in _walk(ast.parse(src)): (fn if in_func else top).update(_targets(node, m, mods) - {m})
        out[m] = dict(lines=len(src.splitlines()), module_level=sorted(top), function_level=sorted(fn - top))
    return out

def cycles(mm:dict)->list:
    "The module-level import cycles of `module_map` output, each as a list of modules (strongly connected components)"
    idx, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    def visit(v):
        idx[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
        for w in mm[v]['module_level']:
            if w not in idx: visit(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v: break
            if len(comp) > 1: out.append(sorted(comp))
    for v in sorted(mm):
        if v not in idx: visit(v)
    return out

def importers(mm:dict, target:str)->dict:
    "Who imports `target`: `{'module_level': [...], 'function_level': [...]}`"
    return {k: sorted(m for m, d in mm.items() if target in d[k]) for k in ('module_level', 'function_level')}

def show(mm:dict)->str:
    "The map as a text table: module, lines, module-level imports, function-level imports; then cycles and cli users"
    rows = [f"{'module':<12} {'lines':>5}  module-level imports | function-level imports"]
    rows += [f"{m:<12} {d['lines']:>5}  {', '.join(d['module_level']) or '-'} | {', '.join(d['function_level']) or '-'}"
             for m, d in sorted(mm.items())]
    rows.append(f"total lines: {sum(d['lines'] for d in mm.values())}")
    rows.append(f"module-level cycles: {cycles(mm) or 'none'}")
    cli = importers(mm, 'cli')
    rows.append(f"importers of cli: module level {cli['module_level'] or 'none'}, "
                f"function level {cli['function_level'] or 'none'}")
    return '\n'.join(rows)

if __name__ == '__main__':
    args = [a for a in sys.argv[1:] if a != '--json']
    mm = module_map(Path(args[0]) if args else root)
    print(json.dumps(dict(modules=mm, cycles=cycles(mm)), indent=1) if '--json' in sys.argv else show(mm))
