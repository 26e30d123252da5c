"""Per-loop static instruction counts of a PTX entry: the natural loops of its CFG, each loop's
instructions by category (one iteration's code, all paths; status-record blocks are outside loops)."""
import re, sys
sys.path.insert(0, "tmp_probe")
from ptx_count import CATS

def blocks(path):
    lines = [l.strip() for l in open(path)]
    start = next(i for i, l in enumerate(lines) if l == "{")
    bl, cur, order = {}, "entry", ["entry"]
    bl[cur] = []
    for l in lines[start + 1:]:
        if l == "}": break
        m = re.match(r"^(\$L__BB\d+_\d+):", l)
        if m:
            cur = m.group(1); order.append(cur); bl[cur] = []; continue
        if l and not l.startswith(("//", ".")) and l.endswith(";"):
            bl[cur].append(l)
    succ = {}
    for k, name in enumerate(order):
        ins = bl[name]; s = []
        for l in ins:
            m = re.search(r"bra(\.uni)?\s+(\$L__BB\d+_\d+)", l)
            if m: s.append(m.group(2))
        last = ins[-1] if ins else ""
        if not (re.match(r"^bra", last) or last.startswith("ret")) and k + 1 < len(order):
            s.append(order[k + 1])
        succ[name] = s
    return bl, succ, order

def loops(succ, entry="entry"):
    # dominators (iterative)
    nodes = list(succ); preds = {n: [] for n in nodes}
    for n, ss in succ.items():
        for s in ss: preds[s].append(n)
    dom = {n: set(nodes) for n in nodes}; dom[entry] = {entry}
    changed = True
    while changed:
        changed = False
        for n in nodes:
            if n == entry: continue
            ps = [dom[p] for p in preds[n]]
            new = ({n} | set.intersection(*ps)) if ps else {n}
            if new != dom[n]: dom[n] = new; changed = True
    result = {}
    for n, ss in succ.items():
        for h in ss:
            if h in dom[n]:       # back edge n -> h
                body, work = {h, n}, [n]
                while work:
                    x = work.pop()
                    for p in preds[x]:
                        if p not in body: body.add(p); work.append(p)
                result.setdefault(h, set()).update(body)
    return result

for path in sys.argv[1:]:
    bl, succ, order = blocks(path)
    for h, body in sorted(loops(succ).items(), key=lambda kv: order.index(kv[0])):
        ins = [l for b in order if b in body for l in bl[b]]
        counts = {"total": len(ins), **{c: sum(1 for l in ins if re.search(rx, l)) for c, rx in CATS.items()}}
        print(f"{path}: loop at {h} ({len(body)} blocks): " + " ".join(f"{k}={v}" for k, v in counts.items() if v))
