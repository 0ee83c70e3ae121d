#!/usr/bin/python3
"""The kernel workspaces of `gradc compile --emit plan --device cuda` plans from two gradc binaries,
over the bundled models in f32 and, for specs with a dtype line, in bf16: per model the plan's
peak from each, and per op the nodes whose workspace differs with their bytes in all.

    /usr/bin/python3 bench/cuda_plan_workspaces.py OLD_GRADC NEW_GRADC REPO_ROOT

Workspaces are the plan's buffers of kind workspace, matched by step and spec layer; "steps
same" says both plans schedule the same ops. bf16 variants are written to /tmp/cudaws/specs.
"""
import collections, json, os, re, subprocess, sys
old, new, repo = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs('/tmp/cudaws/specs', exist_ok=True)
def plan(binary, spec):
    r = subprocess.run([binary, 'compile', spec, '--emit', 'plan', '--device', 'cuda'], capture_output=True, text=True, cwd=repo)
    if r.returncode != 0: return None, r.stderr.strip().splitlines()[-1:] 
    return json.loads(r.stdout), None
def ws(p):
    return [(b['first_step'], b['spec_name'], b['size']) for b in p['buffers'] if b['kind'] == 'workspace']
for name in sorted(os.listdir(os.path.join(repo, 'models'))):
    if not name.endswith('.yaml'): continue
    text = open(os.path.join(repo, 'models', name)).read()
    variants = [('f32', os.path.join(repo, 'models', name))]
    if re.search(r'^dtype:', text, re.M):
        spec = f'/tmp/cudaws/specs/{name[:-5]}-bf16.yaml'
        open(spec, 'w').write(re.sub(r'^dtype:.*$', 'dtype: bf16', text, flags=re.M))
        variants.append(('bf16', spec))
    for dt, spec in variants:
        a, ea = plan(old, spec); b, eb = plan(new, spec)
        if a is None or b is None:
            print(f'{name} {dt}: old {ea or "ok"} / new {eb or "ok"}'); continue
        wa, wb = ws(a), ws(b)
        diffs = []
        da = {(s, n): z for s, n, z in wa}; db = {(s, n): z for s, n, z in wb}
        for k in sorted(set(da) | set(db)):
            if da.get(k, 0) != db.get(k, 0):
                op = a['steps'][k[0]]['op'] if k[0] < len(a['steps']) else '?'
                diffs.append(f'    step {k[0]} {op} ({k[1]}): {da.get(k, 0)} -> {db.get(k, 0)}')
        same = a['steps'] == b['steps']
        print(f'{name} {dt}: peak {a["peak_bytes"]} -> {b["peak_bytes"]}, {len(diffs)} workspace(s) differ, steps {"same" if same else "DIFFER"}')
        byop = collections.OrderedDict()
        for k in sorted(set(da) | set(db)):
            if da.get(k, 0) != db.get(k, 0):
                op = a['steps'][k[0]]['op']
                e = byop.setdefault(op, [0, 0, 0]); e[0] += 1; e[1] += da.get(k, 0); e[2] += db.get(k, 0)
        for op, (n, o, nw) in byop.items(): print(f'    {op}: {n} node(s), workspace {o} -> {nw} bytes in all')
