//! The zkey reader on snarkjs's own files (fixtures/snarkjs): shape, densities, checks,
//! and typed errors for every truncation, corruption and the wrong curve.

mod common;

use std::path::PathBuf;

use memory_budget::{Budget, Category};
use rand::RngExt;
use srs_store::zkey::{ZkeyLayout, ZkeySection};
use srs_store::{PointCheck, SrsError, ZkeyFile};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/snarkjs")
        .join(name)
}

#[test]
fn snarkjs_zkey_loads_into_groth16_shape() {
    let file = ZkeyFile::open(fixture("example.zkey")).unwrap();
    let l = *file.layout();
    // example.circom: ONE, c (output), b (public input), a, x, y.
    assert_eq!((l.n_vars(), l.n_public(), l.n_private()), (6, 2, 3));
    // 3 constraints + 3 input rows → 8 rows.
    assert_eq!(l.domain_size(), 8);
    // A: a·a, a·b, x·b (+ y, c in C only) → A terms a, a, x; B terms a, b, b; 3 input rows.
    assert_eq!(l.n_coefficients(), 9);

    let budget = Budget::fixed(64 << 20);
    let plan = file.plan();
    let zk = file.load(&budget, PointCheck::Full).unwrap();
    let p = zk.params();
    assert_eq!(p.vk().ic.len(), 3);
    // Inputs always in A, then the aux dense in A: a and x (y is only in C).
    assert_eq!(p.a_query().len(), 3 + 2);
    // B: inputs dense in B (b), aux dense in B (a): 2 points.
    assert_eq!(p.b_g1_query().len(), 2);
    assert_eq!(p.b_g2_query().len(), 2);
    assert_eq!(p.l_query().len(), 3);
    assert_eq!(p.h_query().len(), 8);
    let shape = zk.pce().shape();
    assert_eq!((shape.n_inputs, shape.n_aux, shape.n_rows), (3, 3, 8));
    assert_eq!(zk.n_public(), 2);
    assert_eq!(zk.domain_size(), 8);
    // Charged: the kept bases and key (srs) and the matrices (pce), nothing more.
    assert!(plan.peak_bytes() >= p.stats().peak_charged_bytes);
    assert_eq!(
        budget.snapshot().used_in(Category::Srs) + budget.snapshot().used_in(Category::Pce),
        zk.charged_bytes()
    );
    drop(zk);
    assert_eq!(budget.used_bytes(), 0);
}

#[test]
fn a_bn128_zkey_names_its_curve() {
    let err = ZkeyFile::open(fixture("example_bn128.zkey")).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, SrsError::ZkeyCurve { .. }), "{text}");
    assert!(
        text.contains("bn128") && text.contains("0x30644e72"),
        "{text}"
    );
}

#[test]
fn other_files_are_not_zkeys() {
    for (bytes, want) in [
        (&b"r1cs\x01\x00\x00\x00"[..], "r1cs"),
        (&b"{\"pi_a\": []}"[..], "{"),
        (&b""[..], ""),
    ] {
        let err = ZkeyLayout::parse(bytes).unwrap_err();
        assert!(matches!(err, SrsError::ZkeyMagic { .. }), "{err}");
        assert!(err.to_string().contains(want), "{err}");
    }
}

#[test]
fn every_truncation_is_a_typed_error() {
    let bytes = std::fs::read(fixture("example.zkey")).unwrap();
    for len in 0..bytes.len() {
        let err = ZkeyLayout::parse(&bytes[..len]).unwrap_err();
        assert!(
            matches!(
                err,
                SrsError::ZkeyMagic { .. }
                    | SrsError::ZkeyTruncated { .. }
                    | SrsError::ZkeyMissingSection { .. }
                    | SrsError::ZkeySectionSize { .. }
            ),
            "len {len}: {err}"
        );
    }
}

/// Random single-byte corruptions anywhere: parse and load return a value or a typed
/// error, never panic; corruptions of the points or coefficients that load accepts
/// change nothing it checks (they are caught by the proof's self-check downstream).
#[test]
fn random_corruptions_never_panic() {
    let seed = common::seed();
    let mut rng = common::rng(seed);
    let bytes = std::fs::read(fixture("example.zkey")).unwrap();
    let dir = std::env::temp_dir().join(format!("pinion-zkey-{}-{seed}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.zkey");
    let budget = Budget::fixed(64 << 20);
    for _ in 0..200 {
        let mut b = bytes.clone();
        let at = rng.random_range(0..b.len());
        b[at] ^= 1u8 << rng.random_range(0..8u32);
        std::fs::write(&path, &b).unwrap();
        match ZkeyFile::open(&path) {
            Ok(f) => {
                let _ = f.load(&budget, PointCheck::Full);
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
        assert_eq!(budget.used_bytes(), 0, "seed {seed}: byte {at}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_coefficients_and_points_name_their_place() {
    let bytes = std::fs::read(fixture("example.zkey")).unwrap();
    let file = ZkeyFile::open(fixture("example.zkey")).unwrap();
    let coefs = file.layout().span(ZkeySection::Coefficients).unwrap();
    let a_pts = file.layout().span(ZkeySection::A).unwrap();
    let dir = std::env::temp_dir().join(format!("pinion-zkey-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.zkey");
    let budget = Budget::fixed(64 << 20);
    let load = |b: &[u8]| {
        std::fs::write(&path, b).unwrap();
        ZkeyFile::open(&path)
            .and_then(|f| f.load(&budget, PointCheck::Full))
            .unwrap_err()
    };
    // Entry 2's matrix = 7.
    let mut b = bytes.clone();
    let at = (coefs.offset + 4 + 2 * 44) as usize;
    b[at..at + 4].copy_from_slice(&7u32.to_le_bytes());
    let err = load(&b);
    assert!(
        matches!(err, SrsError::ZkeyCoefficient { index: 2, .. }),
        "{err}"
    );
    // Entry 0's signal out of range.
    let mut b = bytes.clone();
    let at = (coefs.offset + 4 + 8) as usize;
    b[at..at + 4].copy_from_slice(&99u32.to_le_bytes());
    let err = load(&b);
    assert!(
        matches!(err, SrsError::ZkeyCoefficient { index: 0, .. }),
        "{err}"
    );
    // A point of signal 3 (a) off the curve: its x coordinate changed.
    let mut b = bytes.clone();
    let at = (a_pts.offset + 3 * 96 + 5) as usize;
    b[at] ^= 0x10;
    let err = load(&b);
    assert!(
        matches!(
            err,
            SrsError::ZkeyPoint {
                section: ZkeySection::A,
                index: 3,
                ..
            }
        ),
        "{err}"
    );
    // Signal 5 (y) has no A term: its A point must be at infinity.
    let mut b = bytes.clone();
    let g = (a_pts.offset + 3 * 96) as usize;
    let y = (a_pts.offset + 5 * 96) as usize;
    b.copy_within(g..g + 96, y);
    let err = load(&b);
    assert!(
        matches!(
            err,
            SrsError::ZkeyPoint {
                section: ZkeySection::A,
                index: 5,
                ..
            }
        ),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
