#!/usr/bin/env python3
"""Checks ntt_emu's output (stdin) against the pass kernels' contract with Python integers.

Each transform is five lines: `ntt log_n tw_log dif inverse w plan ...`, `pre ...`, `post ...`,
`in ...`, `out ...` (raw Montgomery words as hex). DIF takes natural order to bit-reversed, DIT
bit-reversed to natural; `inverse` uses w^-1 (no 1/n); `pre` scales each element as the first
pass loads it and `post` as the last pass stores it: position p times
lo[j & lo_mask] * hi[(j >> lo_bits) & hi_mask] (Montgomery products), j = p (mode 1) or
bit_reverse(p) (mode 2). Prints a summary; exit 1 on any mismatch or on no input.
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


def main():
    lines = [l.split() for l in sys.stdin if l.strip()]
    checked = bad = 0
    for i in range(0, len(lines), 5):
        head, pre_l, post_l, in_l, out_l = lines[i:i + 5]
        assert head[0] == "ntt" and pre_l[0] == "pre" and post_l[0] == "post"
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
        checked += 1
        if got != want:
            bad += 1
            if bad <= 3:
                first = next(p for p in range(n) if got[p] != want[p])
                print("MISMATCH", " ".join(head[:5]), " ".join(head[6:]), "pre", pre_l[1],
                      "post", post_l[1], "first at", first)
    print("checked", checked, "transforms;", bad, "mismatches")
    sys.exit(1 if bad or not checked else 0)


main()
