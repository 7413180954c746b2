#!/usr/bin/env python3
"""Checks ntt_emu's output (stdin) against ntt.cu's kernels' contracts with Python integers.

Each elementwise record is `elt NAME log_n ints...` followed by `arr LABEL hex...` lines (see
check_elementwise). Each transform is five lines: `ntt log_n tw_log dif inverse w plan ...`, `pre ...`, `post ...`,
`in ...`, `out ...` (raw Montgomery words as hex); the plan's passes are `lo:s:clog:k`, k = 1
when the pass ran on the bit-0 kernels. DIF takes natural order to bit-reversed, DIT
bit-reversed to natural; `inverse` uses w^-1 (no 1/n); `pre` scales each element as the first
pass loads it and `post` as the last pass stores it: position p times
lo[j & lo_mask] * hi[(j >> lo_bits) & hi_mask] (Montgomery products), j = p (mode 1) or
bit_reverse(p) (mode 2). Prints a summary; exit 1 on any mismatch, on no input, or when no
transform of a direction ran the bit-0 kernels' twiddle-major stages (a pass over bits [0, s >=
7) on them).
"""
import sys

R = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
RINV = pow(1 << 256, -1, R)


def mont(a, b):
    return a * b * RINV % R


def rev(p, bits):
    return int(format(p, "0%db" % bits)[::-1], 2) if bits else 0


def scale(fields, log_n):
    mode, lo_bits, lo_mask, hi_mask, n_lo, n_hi = (int(x) for x in fields[:6])
    vals = [int(x, 16) for x in fields[6:]]
    lo, hi = vals[:n_lo], vals[n_lo:n_lo + n_hi]
    assert len(hi) == n_hi

    def apply(p, x):
        if mode == 0:
            return x
        j = p if mode == 1 else rev(p, log_n)
        return mont(x, mont(lo[j & lo_mask], hi[(j >> lo_bits) & hi_mask]))

    return apply


def transform(x, w):
    """X_k = sum_j x_j w^(jk), textbook recursive radix-2 (not the kernels' structure)."""
    n = len(x)
    if n == 1:
        return list(x)
    even, odd = transform(x[0::2], w * w % R), transform(x[1::2], w * w % R)
    out, t = [0] * n, 1
    for k in range(n // 2):
        u, v = even[k], odd[k] * t % R
        out[k], out[k + n // 2] = (u + v) % R, (u - v) % R
        t = t * w % R
    return out


def check_transform(head, pre_l, post_l, in_l, out_l):
    """Returns (ok, detail) for one transform record."""
    assert pre_l[0] == "pre" and post_l[0] == "post" and in_l[0] == "in" and out_l[0] == "out"
    log_n, tw_log, dif, inverse = (int(x) for x in head[1:5])
    n = 1 << log_n
    w_tw = int(head[5], 16) * RINV % R  # plain w of order 2^tw_log
    assert pow(w_tw, 1 << tw_log, R) == 1 and (tw_log == 0 or pow(w_tw, 1 << (tw_log - 1), R) != 1)
    w = pow(w_tw, 1 << (tw_log - log_n), R)
    if inverse:
        w = pow(w, -1, R)
    pre, post = scale(pre_l[1:], log_n), scale(post_l[1:], log_n)
    inp = [int(x, 16) for x in in_l[1:]]
    got = [int(x, 16) for x in out_l[1:]]
    assert len(inp) == n and len(got) == n
    loaded = [pre(p, v) for p, v in enumerate(inp)]
    if dif:  # natural in, bit-reversed out
        big = transform(loaded, w)
        want = [post(p, big[rev(p, log_n)]) for p in range(n)]
    else:  # bit-reversed in, natural out
        logical = [loaded[rev(j, log_n)] for j in range(n)]
        big = transform(logical, w)
        want = [post(k, big[k]) for k in range(n)]
    return got == want, " ".join(head[:5]) + " plan " + " ".join(head[7:])


def check_elementwise(head, arrays):
    """The elementwise kernels' contracts (ntt.cu's header)."""
    name, log_n = head[1], int(head[2])
    n = 1 << log_n
    a = {k: [int(x, 16) for x in v] for k, v in arrays.items()}

    def factor(j, lo_bits, lo_mask, hi_mask):
        return mont(a["lo"][j & lo_mask], a["hi"][(j >> lo_bits) & hi_mask])

    if name == "bitrev":
        want = {"out": [a["in"][rev(i, log_n)] for i in range(n)]}
    elif name == "scale":
        lo_bits, lo_mask, hi_mask, bitrev = (int(x) for x in head[3:7])
        want = {"out": [mont(a["in"][p], factor(rev(p, log_n) if bitrev else p, lo_bits, lo_mask, hi_mask))
                        for p in range(n)]}
    elif name == "abc":
        z = a["z"][0]
        want = {"abc": [mont((mont(x, y) - c) % R, z) for x, y, c in zip(a["a"], a["b"], a["c"])],
                "ab": [mont(x, y) for x, y in zip(a["a"], a["b"])]}
    elif name == "gather":
        lo_bits, lo_mask, hi_mask = (int(x) for x in head[3:6])
        k = a["k"][0]
        want = {"out": [(mont(a["in"][rev(i, log_n)], factor(i, lo_bits, lo_mask, hi_mask))
                         - mont(a["sub"][rev(i, log_n)], k)) % R for i in range(n)]}
    elif name == "twiddles":
        tb = int(head[3])
        want = {"out": [mont(a["lo"][i & ((1 << tb) - 1)], a["hi"][i >> tb]) for i in range(n)]}
    else:
        raise ValueError("unknown kernel " + name)
    return all(a[k] == v for k, v in want.items()), " ".join(head[1:])


def main():
    lines = [l.split() for l in sys.stdin if l.strip()]
    counts, bad, i, wide_bit0 = {}, 0, 0, {}
    while i < len(lines):
        head = lines[i]
        if head[0] == "ntt":
            ok, what = check_transform(head, *lines[i + 1:i + 5])
            passes = [tuple(int(v) for v in e.split(":")) for e in head[7:]]
            if ok and any(lo == 0 and s >= 7 and clog == 0 and k == 1 for lo, s, clog, k in passes):
                wide_bit0[head[3]] = wide_bit0.get(head[3], 0) + 1
            kind, i = "transform", i + 5
        elif head[0] == "elt":
            j = i + 1
            arrays = {}
            while j < len(lines) and lines[j][0] == "arr":
                arrays[lines[j][1]] = lines[j][2:]
                j += 1
            ok, what = check_elementwise(head, arrays)
            kind, i = head[1], j
        else:
            raise ValueError("unexpected line: " + " ".join(head[:3]))
        counts[kind] = counts.get(kind, 0) + 1
        if not ok:
            bad += 1
            if bad <= 3:
                print("MISMATCH", kind, what)
    # The bit-0 kernels' twiddle-major stages (k >= 1 with 2^(s-1-k) >= 32 groups) run in a
    # pass over bits [0, s >= 7) on those kernels (plan entries lo:s:clog:k, k = 1): both
    # directions must have had one.
    for dif in ("1", "0"):
        if not wide_bit0.get(dif):
            bad += 1
            print("MISSING a twiddle-major bit-0 pass,", "DIF" if dif == "1" else "DIT")
    total = sum(counts.values())
    print("checked", counts.get("transform", 0), "transforms (" +
          str(sum(wide_bit0.values())), "with twiddle-major bit-0 passes) and",
          total - counts.get("transform", 0), "elementwise kernel runs;", bad, "mismatches")
    sys.exit(1 if bad or not counts.get("transform") else 0)


main()
