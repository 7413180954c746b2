#!/usr/bin/env python3
"""Checks msm_sort_emu's output (stdin): every scalar rebuilt from its bucket entries.

`sort n c W ones others`, `scalars hex...`, `keys k:offset:count:entry...`, `ends last total`
per sort; `select n total`, `mask words...`, `src hex...`, `dst hex...` per compaction (dst:
the selected scalars in order, then two that must still hold the poison 0xdeadbeef words);
then `mont hex...` / `canonical hex...`. Keys are w * B + (|digit| - 1) with
B = 2^(c-1); an entry is the scalar's index with bit 31 for a negative digit; window W holds
the scalars equal to 1, in bucket index mod B. Exit 1 on any mismatch or on no input.
"""
import sys

R = 0x73EDA753299D7D483339D80809A1D80553BDA402FFFE5BFEFFFFFFFF00000001
RINV = pow(1 << 256, -1, R)


def check_sort(head, scalars_l, keys_l, ends_l):
    n, c, w_count, ones, others = (int(x) for x in head[1:6])
    b = 1 << (c - 1)
    scalars = [int(x, 16) for x in scalars_l[1:]]
    assert len(scalars) == n
    errors = []
    if w_count * c < 256:
        errors.append("windows cover %d bits" % (w_count * c))
    rebuilt = [0] * n
    seen = set()
    expect_offset = 0
    total = 0
    for item in keys_l[1:]:
        k, offset, count, *entries = item.split(":")
        k, offset, count = int(k), int(offset), int(count)
        entries = [int(e, 16) for e in entries]
        if offset != expect_offset:  # the exclusive prefix sum over the nonempty keys
            errors.append("key %d offset %d, want %d" % (k, offset, expect_offset))
        expect_offset = offset + count
        total += count
        if len(entries) != count:
            errors.append("key %d holds %d entries, count %d" % (k, len(entries), count))
        w, d = divmod(k, b)
        d += 1
        for e in entries:
            i, neg = e & 0x7FFFFFFF, e >> 31
            if i >= n or (i, w) in seen:
                errors.append("key %d: entry %x out of range or repeated" % (k, e))
                continue
            seen.add((i, w))
            if w == w_count:
                if neg or k % b != i % b:
                    errors.append("ones window: entry %x in key %d" % (e, k))
                rebuilt[i] += 1
            else:
                rebuilt[i] += (-d if neg else d) << (c * w)
    last, total_printed = (int(x) for x in ends_l[1:3])
    if last != total or total_printed != total:
        errors.append("entries end at %d / %d, counts sum to %d" % (last, total_printed, total))
    for i, s in enumerate(scalars):
        if rebuilt[i] != s:
            errors.append("scalar %d: %x rebuilt as %x" % (i, s, rebuilt[i]))
            break
    want_ones = sum(1 for s in scalars if s == 1)
    want_others = sum(1 for s in scalars if s > 1)
    if (ones, others) != (want_ones, want_others):
        errors.append("classes %d/%d, want %d/%d" % (ones, others, want_ones, want_others))
    return errors


def check_select(head, mask_l, src_l, dst_l):
    n, total = int(head[1]), int(head[2])
    mask = [int(x, 16) for x in mask_l[1:]]
    src = [int(x, 16) for x in src_l[1:]]
    dst = [int(x, 16) for x in dst_l[1:]]
    want = [src[i] for i in range(n) if (mask[i // 64] >> (i % 64)) & 1]
    poison = int("deadbeef" * 8, 16)
    errors = []
    if len(want) != total:
        errors.append("select: total %d, mask selects %d" % (total, len(want)))
    if dst[:len(want)] != want:
        errors.append("select n=%d: wrong scalars or order" % n)
    if dst[len(want):] != [poison, poison]:
        errors.append("select n=%d: wrote past the selected scalars" % n)
    return errors


def main():
    lines = [l.split() for l in sys.stdin if l.strip()]
    sorts = selects = bad = 0
    i = 0
    while i < len(lines):
        tag = lines[i][0]
        if tag == "sort":
            errors = check_sort(*lines[i:i + 4])
            sorts += 1
            i += 4
        elif tag == "select":
            errors = check_select(*lines[i:i + 4])
            selects += 1
            i += 4
        elif tag == "mont":
            mont = [int(x, 16) for x in lines[i][1:]]
            canon = [int(x, 16) for x in lines[i + 1][1:]]
            errors = ["from_montgomery %x -> %x" % (a, b) for a, b in zip(mont, canon)
                      if b != a * RINV % R][:1]
            i += 2
        else:
            raise ValueError("unexpected line " + tag)
        if errors:
            bad += 1
            if bad <= 3:
                print("MISMATCH", errors[:3])
    print("checked", sorts, "sorts,", selects, "compactions and the Montgomery conversion;", bad,
          "mismatches")
    sys.exit(1 if bad or not sorts or not selects else 0)


main()
