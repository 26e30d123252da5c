"""Static instruction counts of PTX files by category (the whole entry; the status-record blocks apart)."""
import re, sys
CATS = {"ld.global": r"^ld\.global", "ld.param": r"^ld\.param", "atom.add": r"^atom\.global\.add", "atom.exch": r"^atom\.global\.exch",
        "st.global": r"^st\.global", "local": r"^(ld|st)\.local", "div.f64": r"^div\.rn\.f64", "rcp/sqrt": r"^(sqrt|rcp)\.",
        "shfl/vote": r"^(shfl|vote|activemask)", "-0.0 guard": r"^setp\.(eq|ne)\.b64.*-9223372036854775808", "selp": r"^selp", "setp": r"^setp", "fp64 arith": r"^(add|sub|mul|fma|neg)\.rn?\.?f64|^neg\.f64|^fma\.rn\.f64",
        "branch": r"^@?%?p?\d*\s*bra|^bra|^@"}
def count(path):
    lines = [l.strip() for l in open(path)]
    body = [l for l in lines if l and not l.startswith(("//", ".", "{", "}", "$L", ")")) and l.endswith(";")]
    out = {"total": len(body)}
    for c, rx in CATS.items():
        out[c] = sum(1 for l in body if re.search(rx, l))
    return out
for p in sys.argv[1:]:
    c = count(p)
    print(f"{p:40s} " + " ".join(f"{k}={v}" for k, v in c.items()))
