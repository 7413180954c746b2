#!/usr/bin/env python3
"""Checks field_emu's output (stdin) with Python integers; prints a summary, exit 1 on a mismatch
or on no input."""
import sys

P = 0x1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaaab
R = 0x73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001
FIELDS = {"fp": (P, 384), "fr": (R, 256)}

def main():
    counts, bad = {}, 0
    for line in sys.stdin:
        f, op, *xs = line.split()
        xs = [int(x, 16) for x in xs]
        m, bits = FIELDS["fp" if f == "fp2" else f]
        rinv = pow(1 << bits, -1, m)
        mm = lambda a, b: a * b * rinv % m
        one = (1 << bits) % m
        if f == "fp2":
            if op == "mul":
                a0, a1, b0, b1, c0, c1 = xs
                want = ((mm(a0, b0) - mm(a1, b1)) % m, (mm(a0, b1) + mm(a1, b0)) % m)
            elif op == "sqr":
                a0, a1, c0, c1 = xs
                want = ((mm(a0, a0) - mm(a1, a1)) % m, 2 * mm(a0, a1) % m)
            else:
                a0, a1, c0, c1 = xs
                if a0 == a1 == 0:
                    want = (0, 0)
                else:
                    n = (mm(a0, a0) + mm(a1, a1)) % m
                    # value-domain inverse: n stores nv*R; inverse stores R^2/n
                    ni = pow(n, -1, m) * one * one % m
                    want = (mm(a0, ni), (-mm(a1, ni)) % m)
            ok = (c0, c1) == want
        elif op in ("ladd", "lsub", "lmul", "lred"):
            # ntt.cuh's lazy butterfly arithmetic (Fr): congruent, and below 2r (reduced
            # for lred)
            if op == "lred":
                a, c = xs
                ok = c == a % m
                want = a % m
            else:
                a, b, c = xs
                want = {"ladd": a + b, "lsub": a - b, "lmul": a * b * rinv}[op] % m
                ok = c % m == want and c < 2 * m
        else:
            if op in ("add", "sub", "mul"):
                a, b, c = xs
                want = {"add": (a + b) % m, "sub": (a - b) % m, "mul": mm(a, b)}[op]
            else:
                a, c = xs
                want = (-a) % m if op == "neg" else (0 if a == 0 else pow(a, -1, m) * one * one % m)
            ok = c == want
        counts[(f, op)] = counts.get((f, op), 0) + 1
        if not ok:
            bad += 1
            if bad < 5:
                print("MISMATCH", line.strip(), "want", want, "(mod the field)")
    print("checked", sum(counts.values()), "results over", len(counts), "ops;", bad, "mismatches")
    sys.exit(1 if bad or not counts else 0)

main()
