"""List the flags Megatron-LM's argparse accepts at one commit, for engine/catalog/data/megatron_flags.txt.

Usage: python scripts/stack_flags.py MEGATRON_LM_GIT_DIR REV. Reads, without importing anything of it, the literal
`add_argument("--x")` flags of megatron/training/arguments.py and the flags its ArgumentGroupFactory generates from
config dataclasses (`--field-name`; `--no-`/`--disable-` for a bool that defaults to True; the field's
`argparse_meta` arg_names where it names its own). MindSpeed's own flags are its `add_argument` literals under
mindspeed/ (`git grep`), added to Megatron's at the release MindSpeed pins."""
import ast, re, subprocess, sys
repo, rev = sys.argv[1], sys.argv[2]
def git(*a): return subprocess.run(["git","-C",repo,*a],capture_output=True,text=True,check=True).stdout
def show(p): return git("show", f"{rev}:{p}")
tree = ast.parse(show("megatron/training/arguments.py"))
flags=set()
for node in ast.walk(tree):
    if isinstance(node, ast.Call) and getattr(node.func,"attr","")=="add_argument":
        for a in node.args:
            if isinstance(a, ast.Constant) and isinstance(a.value,str) and a.value.startswith("--"):
                flags.add(a.value)
def class_def(name):
    hits = git("grep","-l",f"^class {name}\\b",rev,"--","megatron").split()
    for h in hits:
        t = ast.parse(show(h.split(":",1)[1]))
        for c in ast.walk(t):
            if isinstance(c, ast.ClassDef) and c.name == name: return c
    return None
def fields(name):
    c = class_def(name); out=[]
    if c is None: return out
    for b in c.bases:
        if isinstance(b, ast.Name): out += fields(b.id)
    for st in c.body:
        if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
            v = st.value
            init = not (isinstance(v, ast.Call) and any(k.arg=="init" and ast.unparse(k.value)=="False" for k in v.keywords))
            out.append((st.target.id, ast.unparse(st.annotation), ast.unparse(v) if v is not None else "", init))
    return out
for fn in ast.walk(tree):
    if not isinstance(fn, ast.FunctionDef): continue
    local_excl = {}
    for st in ast.walk(fn):
        if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and isinstance(st.value, ast.List):
            local_excl[st.targets[0].id] = {e.value for e in st.value.elts if isinstance(e, ast.Constant)}
    for call in ast.walk(fn):
        if not (isinstance(call, ast.Call) and getattr(call.func,"id","")=="ArgumentGroupFactory"): continue
        cls = call.args[0].id; excl=set()
        for k in call.keywords:
            if k.arg=="exclude":
                excl = ({e.value for e in k.value.elts} if isinstance(k.value, ast.List) else local_excl.get(k.value.id,set()))
        for name, ann, d, init in fields(cls):
            if name in excl or not init or name.startswith("_"): continue
            named = re.findall(r"['\"]arg_names['\"]:\s*\[([^\]]*)\]", d)
            if named:
                flags |= set(re.findall(r"['\"](--[a-z0-9-]+)['\"]", named[0])); continue
            if ann=="bool" and (d=="True" or "default=True" in d):
                flags |= {"--no-"+name.replace("_","-"), "--disable-"+name.replace("_","-")}
            else:
                flags.add("--"+name.replace("_","-"))
for f in sorted(flags): print(f)
