//! The seed files, made by the harness itself from one number: the circom fixture circuit
//! (`x³ + x + k = out`, `pinion::fixtures`), a witness, parameters from
//! `groth16::generate_random_parameters`, a proof and its public values, and two PCE files
//! (the same circuit, and a wider one whose every section is non-empty: long rows, two-byte
//! coefficient codes). The same seed gives the same files, so a saved input replays.

use std::path::Path;
use std::sync::Arc;

use bellman::{Circuit, ConstraintSystem, SynthesisError};
use bls12_381::{Bls12, Scalar};
use groth16::{Parameters, PreparedVerifyingKey, Proof};
use groth16_prover::testing::SplitMix;
use groth16_prover::{ProvingKey, Randomness};
use pce_cache::Pce;
use pinion::circom::{wtns_bytes, R1cs};
use pinion::decimal::scalar_to_decimal;
use pinion::fixtures::{cubic_r1cs, cubic_witness};
use pinion::CircomCircuit;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::mutate::{IntField, Layout, PointEncoding, PointSlot};

/// Everything the targets mutate or check against, built from one seed.
pub struct Fixtures {
    /// The seed they were made from.
    pub seed: u64,
    /// The circuit.
    pub r1cs: R1cs,
    /// A witness satisfying it.
    pub witness: Vec<Scalar>,
    /// Its public values (outputs then inputs).
    pub public: Vec<Scalar>,
    /// Parameters for the circuit (insecure: the toxic waste comes from the seed).
    pub params: Parameters<Bls12>,
    /// The same as a proving key (vectors shared, nothing charged).
    pub key: Arc<ProvingKey>,
    /// The prepared verifying key.
    pub pvk: PreparedVerifyingKey<Bls12>,
    /// The blinding of [`Fixtures::proof`] (also used by targets that prove).
    pub randomness: Randomness,
    /// A proof of the witness.
    pub proof: Proof<Bls12>,
    /// Seed files: `.r1cs`, `.wtns`, `.params`, proof, `public.json`, and PCE files.
    pub files: Files,
}

/// The seed files' bytes.
pub struct Files {
    /// `cubic.r1cs`.
    pub r1cs: Vec<u8>,
    /// The witness as `.wtns`.
    pub wtns: Vec<u8>,
    /// The parameters as `groth16::Parameters::write` writes them.
    pub params: Vec<u8>,
    /// The 192-byte proof.
    pub proof: Vec<u8>,
    /// The public values as `pinion prove --public-out` writes them.
    pub public_json: Vec<u8>,
    /// The circuit's PCE file.
    pub pce_cubic: Vec<u8>,
    /// The wide circuit's PCE file.
    pub pce_wide: Vec<u8>,
}

impl Fixtures {
    /// Builds everything from `seed`; `scratch` is a folder for the PCE writer.
    pub fn new(seed: u64, scratch: &Path) -> anyhow::Result<Fixtures> {
        let mut g = SplitMix::new(seed);
        let r1cs = cubic_r1cs();
        let witness = cubic_witness(1 + g.next_u64() % 1000, g.next_u64() % 1000);
        r1cs.check_witness(&witness)?;
        let public = r1cs.public_values(&witness);
        let mut rng = StdRng::seed_from_u64(g.next_u64());
        let params = groth16::generate_random_parameters::<Bls12, _, _>(
            CircomCircuit::shape_only(&r1cs),
            &mut rng,
        )?;
        let randomness = Randomness::new(g.scalar(), g.scalar());
        let proof = groth16::create_proof(
            CircomCircuit::with_witness(&r1cs, &witness)?,
            &params,
            randomness.r,
            randomness.s,
        )?;
        let pvk = groth16::prepare_verifying_key(&params.vk);
        groth16::verify_proof(&pvk, &proof, &public)?;

        let mut params_bytes = Vec::new();
        params.write(&mut params_bytes)?;
        let mut proof_bytes = Vec::new();
        proof.write(&mut proof_bytes)?;
        let public_json = format!(
            "[{}]",
            public
                .iter()
                .map(|v| format!("\"{}\"", scalar_to_decimal(v)))
                .collect::<Vec<_>>()
                .join(", ")
        )
        .into_bytes();
        let pce_file = |name: &str, pce: Pce| -> anyhow::Result<Vec<u8>> {
            let path = scratch.join(name);
            pce.write_to(&path)?;
            let bytes = std::fs::read(&path)?;
            std::fs::remove_file(&path)?;
            Ok(bytes)
        };
        let pce_cubic = pce_file("cubic.pce", Pce::record(CircomCircuit::shape_only(&r1cs))?)?;
        let pce_wide = pce_file("wide.pce", Pce::record(Wide(g.next_u64()))?)?;
        Ok(Fixtures {
            seed,
            key: Arc::new(ProvingKey::from_parameters(&params)),
            files: Files {
                r1cs: r1cs.to_bytes(),
                wtns: wtns_bytes(&witness),
                params: params_bytes,
                proof: proof_bytes,
                public_json,
                pce_cubic,
                pce_wide,
            },
            r1cs,
            witness,
            public,
            params,
            pvk,
            randomness,
            proof,
        })
    }
}

/// A circuit whose PCE has every section non-empty: two inputs, 300 aux variables, 300
/// rows with distinct coefficients (two-byte codes in A) and one row longer than 254
/// terms in each matrix (the long-row list).
struct Wide(u64);

impl Circuit<Scalar> for Wide {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut g = SplitMix::new(self.0);
        let x = cs.alloc_input(|| "x", || Ok(Scalar::from(3u64)))?;
        let _y = cs.alloc_input(|| "y", || Ok(Scalar::from(5u64)))?;
        let vars = (0..300)
            .map(|i| cs.alloc(|| "v", || Ok(Scalar::from(i as u64))))
            .collect::<Result<Vec<_>, _>>()?;
        for i in 0..299 {
            let k = Scalar::from(g.next_u64() | 2);
            cs.enforce(
                || "row",
                |lc| lc + (k, vars[i]) + x,
                |lc| lc + vars[i] - CS::one(),
                |lc| lc + vars[i + 1],
            );
        }
        cs.enforce(
            || "long",
            |lc| vars.iter().fold(lc, |lc, &v| lc + v),
            |lc| vars.iter().fold(lc + x, |lc, &v| lc + v),
            |lc| vars.iter().fold(lc, |lc, &v| lc - v),
        );
        Ok(())
    }
}

/// The layout of a `.params` file: section and point boundaries, the six counts
/// (big-endian u32), every point (uncompressed).
pub fn params_layout(bytes: &[u8]) -> Layout {
    let mut l = Layout::default();
    let Ok(layout) = srs_store::ParamsLayout::parse(bytes) else {
        return l;
    };
    l.boundaries.push(0);
    for (section, at) in srs_store::layout::VK_FIXED {
        let len = section.point_bytes() as usize;
        l.points.push(PointSlot {
            offset: at as usize,
            len,
            encoding: PointEncoding::Uncompressed,
        });
        l.boundaries.push(at as usize + len);
    }
    let mut spans = vec![layout.ic()];
    spans.extend(layout.bulk());
    for span in spans {
        let at = span.count_offset() as usize;
        l.counts.push(IntField {
            offset: at,
            width: 4,
            big_endian: true,
        });
        l.boundaries
            .extend([at, at + 4, span.end_offset() as usize]);
        let pb = span.section().point_bytes() as usize;
        for i in 0..span.n_points() as usize {
            let offset = span.data_offset() as usize + i * pb;
            l.points.push(PointSlot {
                offset,
                len: pb,
                encoding: PointEncoding::Uncompressed,
            });
            l.boundaries.push(offset);
        }
    }
    l.boundaries.sort_unstable();
    l.boundaries.dedup();
    l
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn le64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn int(offset: usize, width: usize) -> IntField {
    IntField {
        offset,
        width,
        big_endian: false,
    }
}

/// The layout of a circom `.r1cs` or `.wtns` file: the section table (counts and sizes),
/// the header's counts, and for `.r1cs` every term count and wire index and the labels.
/// Written from the iden3 format description, independently of the parser.
pub fn circom_layout(bytes: &[u8]) -> Layout {
    let mut l = Layout {
        boundaries: vec![0, 4, 8, 12],
        counts: vec![int(4, 4), int(8, 4)],
        ..Layout::default()
    };
    let r1cs = bytes.starts_with(b"r1cs");
    let n_sections = le32(bytes, 8).unwrap_or(0);
    let mut p = 12usize;
    for _ in 0..n_sections {
        let (Some(kind), Some(size)) = (le32(bytes, p), le64(bytes, p + 4)) else {
            break;
        };
        l.counts.extend([int(p, 4), int(p + 4, 8)]);
        let start = p + 12;
        let Some(end) = usize::try_from(size)
            .ok()
            .and_then(|s| start.checked_add(s))
            .filter(|&e| e <= bytes.len())
        else {
            break;
        };
        l.boundaries.extend([p, start, end]);
        match (r1cs, kind) {
            // Header: field size, prime, then the counts.
            (_, 1) => {
                l.counts.push(int(start, 4));
                l.boundaries.extend([start + 4, start + 36]);
                let fields: &[(usize, usize)] = if r1cs {
                    &[(36, 4), (40, 4), (44, 4), (48, 4), (52, 8), (60, 4)]
                } else {
                    &[(36, 4)]
                };
                for &(off, w) in fields {
                    l.counts.push(int(start + off, w));
                    l.boundaries.push(start + off);
                }
            }
            // Constraints: per linear combination a term count, then (wire, coefficient).
            (true, 2) => {
                let mut q = start;
                while q + 4 <= end {
                    let n = le32(bytes, q).unwrap_or(0) as usize;
                    l.counts.push(int(q, 4));
                    l.boundaries.push(q);
                    q += 4;
                    for _ in 0..n {
                        if q + 36 > end {
                            break;
                        }
                        l.counts.push(int(q, 4));
                        l.boundaries.push(q);
                        q += 36;
                    }
                }
            }
            // Wire-to-label map: one u64 per wire.
            (true, 3) => {
                for q in (start..end).step_by(8) {
                    l.counts.push(int(q, 8));
                    l.boundaries.push(q);
                }
            }
            // Witness values: 32 bytes each.
            (false, 2) => l.boundaries.extend((start..end).step_by(32)),
            _ => {}
        }
        p = end;
    }
    l.boundaries.sort_unstable();
    l.boundaries.dedup();
    l
}

/// Bytes of the PCE header before the section table, and of one table entry (the layout
/// documented in `pce-cache`'s `file.rs`).
const PCE_FIXED: usize = 128;
const PCE_ENTRY: usize = 64;

/// The layout of a PCE file: header fields, the section table's sizes and offsets, and
/// every section's start and end.
pub fn pce_layout(bytes: &[u8]) -> Layout {
    let mut l = Layout {
        boundaries: vec![0, 8, 12, 16, 24, 56, 60, 64, 96, 128],
        counts: vec![
            int(8, 4),
            int(12, 4),
            int(16, 8),
            int(24, 8),
            int(32, 8),
            int(40, 8),
            int(48, 8),
            int(56, 4),
            int(60, 4),
        ],
        ..Layout::default()
    };
    let n = le32(bytes, 60).unwrap_or(0) as usize;
    for k in 0..n {
        let e = PCE_FIXED + k * PCE_ENTRY;
        let (Some(elem), Some(off), Some(count)) =
            (le32(bytes, e + 4), le64(bytes, e + 8), le64(bytes, e + 16))
        else {
            break;
        };
        l.counts
            .extend([int(e, 4), int(e + 4, 4), int(e + 8, 8), int(e + 16, 8)]);
        l.boundaries.push(e);
        let (off, len) = (off as usize, (count as usize).saturating_mul(elem as usize));
        if off.saturating_add(len) <= bytes.len() {
            l.boundaries.extend([off, off + len]);
        }
    }
    l.boundaries.sort_unstable();
    l.boundaries.dedup();
    l
}

/// Recomputes a PCE file's checksums after a mutation, so the mutation reaches the checks
/// behind them: with `sections`, every section's sha256 in the table; then the
/// fingerprint (shape, element sizes, counts, section sums) and the header checksum.
/// An unmutated file is left byte-identical (tested).
pub fn pce_reseal(b: &mut [u8], sections: bool) {
    use sha2::{Digest, Sha256};
    const N_SECTIONS: usize = 23;
    let table_end = PCE_FIXED + PCE_ENTRY * N_SECTIONS;
    if b.len() < table_end {
        return;
    }
    if sections {
        for k in 0..N_SECTIONS {
            let e = PCE_FIXED + k * PCE_ENTRY;
            let (elem, off, count) = (
                le32(b, e + 4).unwrap_or(0) as usize,
                le64(b, e + 8).unwrap_or(0) as usize,
                le64(b, e + 16).unwrap_or(0) as usize,
            );
            let end = count.checked_mul(elem).and_then(|l| l.checked_add(off));
            if let Some(end) = end.filter(|&end| end <= b.len() && off <= end) {
                let sum: [u8; 32] = Sha256::digest(&b[off..end]).into();
                b[e + 32..e + 64].copy_from_slice(&sum);
            }
        }
    }
    let mut h = Sha256::new();
    h.update(b"pinion-pce-fingerprint-v1");
    for at in [24, 32, 40, 48] {
        h.update(&b[at..at + 8]);
    }
    h.update(u64::from(le32(b, 56).unwrap_or(0)).to_le_bytes());
    for k in 0..N_SECTIONS {
        let e = PCE_FIXED + k * PCE_ENTRY;
        h.update((k as u32).to_le_bytes());
        h.update(&b[e + 4..e + 8]);
        h.update(&b[e + 16..e + 24]);
        h.update(&b[e + 32..e + 64]);
    }
    let fp: [u8; 32] = h.finalize().into();
    b[64..96].copy_from_slice(&fp);
    let mut h = Sha256::new();
    h.update(&b[..96]);
    h.update(&b[PCE_FIXED..table_end]);
    let sum: [u8; 32] = h.finalize().into();
    b[96..128].copy_from_slice(&sum);
}
