//! One test per bad-input case: each is a typed error naming the section, index or offset;
//! nothing stays charged to the budget; `srs-inspect` exits 1 with a one-line reason.

mod common;

use std::process::Command;

use bls12_381::{G1Affine, G2Affine};
use common::*;
use memory_budget::Budget;
use rand::rngs::StdRng;
use rand::{Rng, RngExt};
use srs_store::{ExpectedSizes, LoadOptions, ParamsFile, PointCheck, Section, SrsError};

const GIB: u64 = 1 << 30;

/// A valid file and the offsets of its sections, computed from the reference lengths
/// (independently of the crate's own header walk).
struct Valid {
    bytes: Vec<u8>,
    /// (section, count offset, n_points, point bytes) for ic, h, l, a, b_g1, b_g2.
    spans: Vec<(Section, usize, usize, usize)>,
}

impl Valid {
    fn new(rng: &mut StdRng) -> Valid {
        let params = generate(
            rng.random(),
            rng.random_range(1..4),
            rng.random_range(4..24),
        );
        let bytes = to_bytes(&params);
        let mut spans = Vec::new();
        let mut at = 3 * 96 + 3 * 192;
        for (s, n, pb) in [
            (Section::Ic, params.vk.ic.len(), 96),
            (Section::H, params.h.len(), 96),
            (Section::L, params.l.len(), 96),
            (Section::A, params.a.len(), 96),
            (Section::BG1, params.b_g1.len(), 96),
            (Section::BG2, params.b_g2.len(), 192),
        ] {
            spans.push((s, at, n, pb));
            at += 4 + n * pb;
        }
        assert_eq!(at, bytes.len());
        Valid { bytes, spans }
    }

    fn span(&self, s: Section) -> (usize, usize, usize) {
        let (_, at, n, pb) = *self.spans.iter().find(|x| x.0 == s).unwrap();
        (at, n, pb)
    }

    /// Offset of point `index` of `s`.
    fn point(&self, s: Section, index: usize) -> usize {
        let (at, _, pb) = self.span(s);
        at + 4 + index * pb
    }

    fn random_point(&self, rng: &mut StdRng, s: Section) -> (usize, usize) {
        let (_, n, _) = self.span(s);
        let i = rng.random_range(0..n);
        (i, self.point(s, i))
    }
}

/// Loads `bytes` with `options`, asserts the error matches, that nothing stays charged, and
/// that `srs-inspect` (same check mode) exits 1 with one line naming `section` and an offset.
fn check(
    bytes: &[u8],
    options: LoadOptions,
    matches: impl Fn(&SrsError) -> bool,
    section: Option<Section>,
) {
    let dir = TempDir::new("corrupt");
    let path = dir.write("bad.params", bytes);
    let budget = Budget::fixed(GIB);
    let result = ParamsFile::open(&path).and_then(|f| f.load(&budget, &options));
    let err = result.expect_err("corrupt file must not load");
    assert!(matches(&err), "unexpected error: {err}");
    assert_eq!(budget.used_bytes(), 0, "charge left behind after: {err}");
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "one-line message: {msg}");

    if let Some(section) = section {
        assert!(
            msg.contains(section.name()),
            "message names {section}: {msg}"
        );
        assert!(msg.contains("offset"), "message names an offset: {msg}");
        let check = match options.check {
            PointCheck::None => "none",
            PointCheck::Curve => "curve",
            PointCheck::Full => "full",
        };
        let out = Command::new(env!("CARGO_BIN_EXE_srs-inspect"))
            .arg(&path)
            .args(["--check", check])
            .output()
            .expect("run srs-inspect");
        assert_eq!(
            out.status.code(),
            Some(1),
            "srs-inspect exit status for: {msg}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(stdout.lines().count(), 1, "one line: {stdout}");
        assert!(
            stdout.contains(section.name()) && stdout.contains("offset"),
            "{stdout}"
        );
    }
}

fn opts(check: PointCheck) -> LoadOptions {
    LoadOptions {
        check,
        ..LoadOptions::default()
    }
}

#[test]
fn truncated_inside_each_section() {
    let seed = seed();
    let mut rng = rng(seed);
    let v = Valid::new(&mut rng);
    for (s, at, n, pb) in v.spans.clone() {
        if n == 0 {
            continue;
        }
        // Cut somewhere inside the points (the count itself is intact).
        let cut = rng.random_range(at + 4..at + 4 + n * pb);
        let expect_at = (at + 4) as u64;
        check(
            &v.bytes[..cut],
            opts(PointCheck::None),
            |e| matches!(e, SrsError::SectionTruncated { section, offset, .. } if *section == s && *offset == expect_at),
            Some(s),
        );
    }
}

#[test]
fn shorter_than_its_header() {
    let seed = seed();
    let mut rng = rng(seed);
    let v = Valid::new(&mut rng);
    // Inside the fixed verifying-key points.
    let cut = rng.random_range(0..864);
    check(
        &v.bytes[..cut],
        opts(PointCheck::None),
        |e| matches!(e, SrsError::HeaderTruncated { .. }),
        None,
    );
    // Inside the ic count.
    let cut = rng.random_range(864..868);
    check(
        &v.bytes[..cut],
        opts(PointCheck::None),
        |e| {
            matches!(
                e,
                SrsError::HeaderTruncated {
                    section: Section::Ic,
                    offset: 864,
                    ..
                }
            )
        },
        Some(Section::Ic),
    );
    // Inside a later count.
    let (at, _, _) = v.span(Section::A);
    let cut = rng.random_range(at..at + 4);
    check(
        &v.bytes[..cut],
        opts(PointCheck::None),
        |e| matches!(e, SrsError::HeaderTruncated { section: Section::A, offset, .. } if *offset == at as u64),
        Some(Section::A),
    );
}

#[test]
fn lengths_that_disagree_with_counts() {
    let seed = seed();
    let mut rng = rng(seed);
    let v = Valid::new(&mut rng);
    // Trailing bytes.
    let mut b = v.bytes.clone();
    let extra = rng.random_range(1..300);
    b.extend((0..extra).map(|_| rng.random::<u8>()));
    let len = v.bytes.len() as u64;
    check(
        &b,
        opts(PointCheck::None),
        |e| matches!(e, SrsError::TrailingBytes { expected_bytes, .. } if *expected_bytes == len),
        None,
    );
    // b_g2 sized as if its points were G1 (96 bytes): one more point claimed, 96 bytes added.
    let mut b = v.bytes.clone();
    let (at, n, _) = v.span(Section::BG2);
    b[at..at + 4].copy_from_slice(&(n as u32 + 1).to_be_bytes());
    b.extend(std::iter::repeat_n(0u8, 96));
    check(
        &b,
        opts(PointCheck::None),
        |e| {
            matches!(
                e,
                SrsError::SectionTruncated {
                    section: Section::BG2,
                    ..
                }
            )
        },
        Some(Section::BG2),
    );
}

#[test]
fn counts_that_overflow() {
    let seed = seed();
    let mut rng = rng(seed);
    let v = Valid::new(&mut rng);
    for s in [
        Section::Ic,
        Section::H,
        Section::L,
        Section::A,
        Section::BG1,
        Section::BG2,
    ] {
        let mut b = v.bytes.clone();
        let (at, _, _) = v.span(s);
        let n = rng.random_range(u32::MAX - 1000..=u32::MAX);
        b[at..at + 4].copy_from_slice(&n.to_be_bytes());
        check(
            &b,
            opts(PointCheck::None),
            |e| matches!(e, SrsError::SectionTruncated { section, n_points, .. } if *section == s && *n_points == n),
            Some(s),
        );
    }
}

#[test]
fn bad_flag_bits_and_unreduced_coordinates() {
    let seed = seed();
    let mut rng = rng(seed);
    let v = Valid::new(&mut rng);
    type Corrupt = fn(&mut [u8]);
    let cases: [(Section, Corrupt); 4] = [
        (Section::H, |p| p[0] |= 0x80),         // compression flag
        (Section::BG2, |p| p[0] |= 0x20),       // sort flag
        (Section::L, |p| p[0] |= 0x40),         // infinity flag with a payload
        (Section::BG1, |p| p[..48].fill(0x1f)), // x >= p (flags clear)
    ];
    for (s, corrupt) in cases {
        let (i, off) = v.random_point(&mut rng, s);
        let mut b = v.bytes.clone();
        corrupt(&mut b[off..]);
        check(
            &b,
            opts(PointCheck::None),
            |e| {
                matches!(e, SrsError::BadEncoding { section, index, offset, .. }
                    if *section == s && *index == i as u64 && *offset == off as u64)
            },
            Some(s),
        );
    }
}

#[test]
fn point_at_infinity_rejected_like_the_reference() {
    let seed = seed();
    let mut rng = rng(seed);
    let v = Valid::new(&mut rng);
    for s in [Section::A, Section::BG2, Section::Ic] {
        let (i, off) = v.random_point(&mut rng, s);
        let pb = s.point_bytes() as usize;
        let mut b = v.bytes.clone();
        b[off..off + pb].fill(0);
        b[off] = 0x40;
        check(
            &b,
            opts(PointCheck::None),
            |e| matches!(e, SrsError::PointAtInfinity { section, index, .. } if *section == s && *index == i as u64),
            Some(s),
        );
    }
}

/// The verifying key's six fixed points at infinity: every key read refuses each one
/// (`verifying_key`, `read_verifying_key`, a load), naming the point and its offset.
#[test]
fn identity_in_each_verifying_key_point_is_refused() {
    let seed = seed();
    let mut rng = rng(seed);
    let v = Valid::new(&mut rng);
    let dir = TempDir::new("vk-identity");
    for (section, at) in srs_store::layout::VK_FIXED {
        let (at, pb) = (at as usize, section.point_bytes() as usize);
        let mut b = v.bytes.clone();
        b[at..at + pb].fill(0);
        b[at] = 0x40;
        let is_identity = |e: &SrsError| {
            matches!(e, SrsError::PointAtInfinity { section: s, index: 0, offset }
                if *s == section && *offset == at as u64)
        };
        let path = dir.write("vk.params", &b);
        let file = ParamsFile::open(&path).expect("the header walk does not read points");
        let err = file.verifying_key().expect_err("identity accepted");
        assert!(is_identity(&err), "{section}: {err}");
        assert_eq!(
            err.to_string(),
            format!("{section}[0] at byte offset {at}: point at infinity")
        );
        let err = srs_store::read_verifying_key(&path).expect_err("identity accepted");
        assert!(is_identity(&err), "{section}: {err}");
        check(&b, opts(PointCheck::None), is_identity, Some(section));
    }
}

#[test]
fn off_curve_points() {
    let seed = seed();
    let mut rng = rng(seed);
    let v = Valid::new(&mut rng);
    for s in [Section::BG1, Section::BG2, Section::H] {
        let (i, off) = v.random_point(&mut rng, s);
        let pb = s.point_bytes() as usize;
        let mut b = v.bytes.clone();
        // Nudge the low byte of y: still below p, no longer on the curve.
        b[off + pb - 1] ^= 1 + rng.random_range(0..7u8);
        for check_mode in [PointCheck::Curve, PointCheck::Full] {
            check(
                &b,
                opts(check_mode),
                |e| {
                    matches!(e, SrsError::NotOnCurve { section, index, offset }
                        if *section == s && *index == i as u64 && *offset == off as u64)
                },
                Some(s),
            );
        }
        // Encoding-only mode does not evaluate the curve equation (documented): it loads.
        let dir = TempDir::new("offcurve-none");
        let path = dir.write("p.params", &b);
        let budget = Budget::fixed(GIB);
        ParamsFile::open(&path)
            .unwrap()
            .load(&budget, &opts(PointCheck::None))
            .expect("none mode skips the curve check");
    }
    // The verifying key is always fully checked.
    let mut b = v.bytes.clone();
    b[95] ^= 1;
    check(
        &b,
        opts(PointCheck::None),
        |e| {
            matches!(
                e,
                SrsError::NotOnCurve {
                    section: Section::AlphaG1,
                    ..
                }
            )
        },
        Some(Section::AlphaG1),
    );
}

/// An on-curve G1 point outside the prime-order subgroup, from a random x.
fn g1_outside_subgroup(rng: &mut StdRng) -> [u8; 96] {
    loop {
        let mut c = [0u8; 48];
        rng.fill_bytes(&mut c);
        c[0] = (c[0] % 0x1a) | 0x80; // below p, compression flag
        let p = G1Affine::from_compressed_unchecked(&c);
        if bool::from(p.is_some()) {
            let p = p.unwrap();
            if !bool::from(p.is_torsion_free()) && !bool::from(p.is_identity()) {
                return p.to_uncompressed();
            }
        }
    }
}

fn g2_outside_subgroup(rng: &mut StdRng) -> [u8; 192] {
    loop {
        let mut c = [0u8; 96];
        rng.fill_bytes(&mut c);
        c[0] = (c[0] % 0x1a) | 0x80;
        c[48] %= 0x1a;
        let p = G2Affine::from_compressed_unchecked(&c);
        if bool::from(p.is_some()) {
            let p = p.unwrap();
            if !bool::from(p.is_torsion_free()) && !bool::from(p.is_identity()) {
                return p.to_uncompressed();
            }
        }
    }
}

#[test]
fn points_outside_the_subgroup_in_full_mode() {
    let seed = seed();
    let mut rng = rng(seed);
    let v = Valid::new(&mut rng);
    let g1 = g1_outside_subgroup(&mut rng);
    let g2 = g2_outside_subgroup(&mut rng);
    for s in [Section::L, Section::BG2] {
        let (i, off) = v.random_point(&mut rng, s);
        let mut b = v.bytes.clone();
        if s.is_g2() {
            b[off..off + 192].copy_from_slice(&g2);
        } else {
            b[off..off + 96].copy_from_slice(&g1);
        }
        check(
            &b,
            opts(PointCheck::Full),
            |e| {
                matches!(e, SrsError::NotInSubgroup { section, index, offset }
                    if *section == s && *index == i as u64 && *offset == off as u64)
            },
            Some(s),
        );
        // Curve mode accepts it (it is on the curve).
        let dir = TempDir::new("subgroup-curve");
        let path = dir.write("p.params", &b);
        ParamsFile::open(&path)
            .unwrap()
            .load(&Budget::fixed(GIB), &opts(PointCheck::Curve))
            .expect("on curve");
    }
}

#[test]
fn expected_size_mismatch() {
    let seed = seed();
    let mut rng = rng(seed);
    let v = Valid::new(&mut rng);
    let (_, n_l, _) = v.span(Section::L);
    let (_, n_ic, _) = v.span(Section::Ic);
    let wrong = n_l as u32 + rng.random_range(1..5);
    let options = LoadOptions {
        expected: ExpectedSizes {
            n_ic: Some(n_ic as u32),
            n_l: Some(wrong),
            ..ExpectedSizes::default()
        },
        ..LoadOptions::default()
    };
    check(
        &v.bytes,
        options,
        |e| matches!(e, SrsError::ExpectedSizeMismatch { section: Section::L, expected, found } if *expected == wrong && *found == n_l as u32),
        None,
    );
}

#[test]
fn budget_too_small_fails_at_once_and_charges_nothing() {
    let seed = seed();
    let mut rng = rng(seed);
    let v = Valid::new(&mut rng);
    let dir = TempDir::new("budget");
    let path = dir.write("p.params", &v.bytes);
    let file = ParamsFile::open(&path).unwrap();
    let plan = file.plan(&LoadOptions::default());
    let budget = Budget::fixed(plan.peak_bytes() - 1);
    let err = file.load(&budget, &LoadOptions::default()).unwrap_err();
    assert!(
        matches!(err, SrsError::Budget { requested_bytes, .. } if requested_bytes == plan.peak_bytes()),
        "{err}"
    );
    assert_eq!(budget.used_bytes(), 0);
    // Exactly the peak is enough.
    let budget = Budget::fixed(plan.peak_bytes());
    let loaded = file.load(&budget, &LoadOptions::default()).unwrap();
    assert_eq!(budget.used_bytes(), plan.destination_bytes);
    drop(loaded);
    assert_eq!(budget.used_bytes(), 0);
}

#[test]
fn inspect_accepts_a_valid_file() {
    let seed = seed();
    let mut rng = rng(seed);
    let v = Valid::new(&mut rng);
    let dir = TempDir::new("inspect");
    let path = dir.write("p.params", &v.bytes);
    for check in ["none", "curve", "full"] {
        let out = Command::new(env!("CARGO_BIN_EXE_srs-inspect"))
            .arg(&path)
            .args(["--check", check, "--json"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(json["valid"], true);
        assert_eq!(json["file_bytes"], v.bytes.len() as u64);
        let (_, n_h, _) = v.span(Section::H);
        assert_eq!(json["sections"][1]["section"], "h_query");
        assert_eq!(json["sections"][1]["n_points"], n_h as u64);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_srs-inspect"))
        .arg(dir.path().join("missing.params"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = Command::new(env!("CARGO_BIN_EXE_srs-inspect"))
        .args(["--check", "sometimes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
