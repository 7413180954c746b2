//! circom's `.r1cs` (iden3 binary format, version 1).
//!
//! Layout: magic `r1cs`, version u32 = 1, section count u32, then sections (type u32,
//! size u64, content) in any order. Header (type 1): field size u32 (32), prime (32 bytes),
//! n_wires u32, n_pub_out u32, n_pub_in u32, n_prv_in u32, n_labels u64, n_constraints u32.
//! Constraints (type 2): per constraint the linear combinations A, B, C, each a term count
//! u32 then (wire u32, coefficient 32 bytes) per term. Wire-to-label map (type 3): one u64
//! per wire. All integers and field elements little-endian, field elements canonical.

use bls12_381::Scalar;
use ff::Field;

use super::reader::{self, put_field, put_section};
use super::{CircomError, FileKind};
use crate::decimal::scalar_to_decimal;

const KIND: FileKind = FileKind::R1cs;
const MAGIC: &str = "r1cs";
const VERSION: u32 = 1;
const SECTION_HEADER: u32 = 1;
const SECTION_CONSTRAINTS: u32 = 2;
const SECTION_WIRE_MAP: u32 = 3;
/// Plonk custom-gate sections of circom 2 (list and applications).
const SECTION_CUSTOM_GATES: [u32; 2] = [4, 5];
/// Bytes of a term on disk: wire u32 + coefficient.
const TERM_BYTES: usize = 4 + 32;

/// One term of a linear combination: coefficient · wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Term {
    /// Wire id (0 is the constant one).
    pub wire: u32,
    /// Coefficient.
    pub coeff: Scalar,
}

/// One constraint: ⟨a, w⟩ · ⟨b, w⟩ = ⟨c, w⟩, terms as written in the file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Constraint {
    /// A's terms.
    pub a: Vec<Term>,
    /// B's terms.
    pub b: Vec<Term>,
    /// C's terms.
    pub c: Vec<Term>,
}

/// A parsed constraint system over the BLS12-381 scalar field.
///
/// Invariants (checked by [`R1cs::parse`] and [`R1cs::new`]): `1 + n_pub_out + n_pub_in +
/// n_prv_in <= n_wires`; every term's wire is below `n_wires`; the wire map has `n_wires`
/// entries, wire 0 has label 0, labels are distinct and below `n_labels >= n_wires`.
///
/// The prover uses the wire counts and the constraints. `n_prv_in` only enters the count
/// check above (private inputs are proved like every other private wire), and the labels
/// only the map's checks: both are checked for consistency, never used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct R1cs {
    n_wires: u32,
    n_pub_out: u32,
    n_pub_in: u32,
    n_prv_in: u32,
    n_labels: u64,
    constraints: Vec<Constraint>,
    wire_to_label: Vec<u64>,
}

fn check_counts(
    n_wires: u32,
    n_pub_out: u32,
    n_pub_in: u32,
    n_prv_in: u32,
) -> Result<(), CircomError> {
    let needed = 1 + u64::from(n_pub_out) + u64::from(n_pub_in) + u64::from(n_prv_in);
    if needed > u64::from(n_wires) {
        return Err(CircomError::WireCounts {
            n_wires,
            n_pub_out,
            n_pub_in,
            n_prv_in,
        });
    }
    Ok(())
}

/// The wire-to-label map against the header: every wire is one signal of the circuit's
/// symbol table, so `n_labels >= n_wires`, wire 0 (the constant one) is label 0, every
/// label is below `n_labels`, and no two wires share a label. The prover never reads the
/// labels; a file that breaks these rules was not written by circom, and is refused rather
/// than trusted elsewhere. Cost: a sorted copy of the map (charged by the caller through
/// [`R1cs::parsed_bytes_bound`]).
fn check_labels(n_wires: u32, n_labels: u64, wire_to_label: &[u64]) -> Result<(), CircomError> {
    if n_labels < u64::from(n_wires) {
        return Err(CircomError::LabelCount { n_labels, n_wires });
    }
    let bad = |wire: u64, label: u64, reason: String| CircomError::WireLabel {
        wire,
        label,
        reason,
    };
    if let Some(&l) = wire_to_label.first().filter(|&&l| l != 0) {
        return Err(bad(0, l, "expected 0 (wire 0 is the constant one)".into()));
    }
    if let Some((w, &l)) = wire_to_label
        .iter()
        .enumerate()
        .find(|(_, &l)| l >= n_labels)
    {
        return Err(bad(
            w as u64,
            l,
            format!("not below the header's label count {n_labels}"),
        ));
    }
    let mut sorted: Vec<(u64, u32)> = wire_to_label
        .iter()
        .zip(0u32..)
        .map(|(&l, w)| (l, w))
        .collect();
    sorted.sort_unstable();
    if let Some(pair) = sorted.windows(2).find(|p| p[0].0 == p[1].0) {
        let (first, second) = (pair[0].1.min(pair[1].1), pair[0].1.max(pair[1].1));
        return Err(bad(
            u64::from(second),
            pair[0].0,
            format!("already the label of wire {first}"),
        ));
    }
    Ok(())
}

fn eval(lc: &[Term], witness: &[Scalar]) -> Scalar {
    lc.iter().fold(Scalar::ZERO, |acc, t| {
        acc + witness
            .get(t.wire as usize)
            .copied()
            .unwrap_or(Scalar::ZERO)
            * t.coeff
    })
}

impl R1cs {
    /// A constraint system from parts (used to write fixtures); checks the invariants.
    /// The wire map is the identity and `n_labels = n_wires`.
    pub fn new(
        n_wires: u32,
        n_pub_out: u32,
        n_pub_in: u32,
        n_prv_in: u32,
        constraints: Vec<Constraint>,
    ) -> Result<R1cs, CircomError> {
        check_counts(n_wires, n_pub_out, n_pub_in, n_prv_in)?;
        for (i, c) in constraints.iter().enumerate() {
            for (matrix, lc) in [("a", &c.a), ("b", &c.b), ("c", &c.c)] {
                for (j, t) in lc.iter().enumerate() {
                    if t.wire >= n_wires {
                        return Err(CircomError::WireOutOfRange {
                            constraint: i as u64,
                            matrix,
                            term: j as u64,
                            wire: t.wire,
                            n_wires,
                        });
                    }
                }
            }
        }
        Ok(R1cs {
            n_wires,
            n_pub_out,
            n_pub_in,
            n_prv_in,
            n_labels: u64::from(n_wires),
            constraints,
            wire_to_label: (0..u64::from(n_wires)).collect(),
        })
    }

    /// Parses a whole `.r1cs` file. Nothing proportional to a declared count is allocated
    /// before the bytes for it are known to exist.
    pub fn parse(bytes: &[u8]) -> Result<R1cs, CircomError> {
        let (file, entries) = reader::sections(KIND, bytes, MAGIC, VERSION)?;
        for t in SECTION_CUSTOM_GATES {
            if reader::find(KIND, &entries, t, "custom gates")?.is_some() {
                return Err(CircomError::CustomGates { section_type: t });
            }
        }
        let header = reader::require(KIND, &entries, SECTION_HEADER, "header")?;
        let cons = reader::require(KIND, &entries, SECTION_CONSTRAINTS, "constraints")?;
        let map = reader::require(KIND, &entries, SECTION_WIRE_MAP, "wire-to-label map")?;

        let mut h = file.sub(header.start, header.len);
        reader::field(&mut h, KIND)?;
        let n_wires = h.u32("wire count")?;
        let n_pub_out = h.u32("public output count")?;
        let n_pub_in = h.u32("public input count")?;
        let n_prv_in = h.u32("private input count")?;
        let n_labels = h.u64("label count")?;
        let n_constraints = h.u32("constraint count")?;
        if h.remaining() != 0 {
            return Err(CircomError::SectionSize {
                kind: KIND,
                section: "header",
                offset: header.start as u64,
                declared_bytes: header.len as u64,
                expected_bytes: h.pos() as u64,
            });
        }
        check_counts(n_wires, n_pub_out, n_pub_in, n_prv_in)?;

        let mut c = file.sub(cons.start, cons.len);
        // Each constraint takes at least 12 bytes (three term counts): bound the capacity.
        let mut constraints = Vec::with_capacity((n_constraints as usize).min(c.remaining() / 12));
        for i in 0..u64::from(n_constraints) {
            let mut lcs: [Vec<Term>; 3] = Default::default();
            for (m, matrix) in ["a", "b", "c"].into_iter().enumerate() {
                let n_terms = c.u32(&format!("term count of constraint {i}, {matrix}"))?;
                let mut lc = Vec::with_capacity((n_terms as usize).min(c.remaining() / TERM_BYTES));
                for j in 0..u64::from(n_terms) {
                    let wire = c.u32(&format!("constraint {i}, {matrix} term {j}"))?;
                    if wire >= n_wires {
                        return Err(CircomError::WireOutOfRange {
                            constraint: i,
                            matrix,
                            term: j,
                            wire,
                            n_wires,
                        });
                    }
                    let coeff =
                        c.scalar(|| format!("coefficient of constraint {i}, {matrix} term {j}"))?;
                    lc.push(Term { wire, coeff });
                }
                lcs[m] = lc;
            }
            let [a, b, cc] = lcs;
            constraints.push(Constraint { a, b, c: cc });
        }
        if c.remaining() != 0 {
            // More bytes than the header's count of constraints explains.
            return Err(CircomError::SectionSize {
                kind: KIND,
                section: "constraints",
                offset: cons.start as u64,
                declared_bytes: cons.len as u64,
                expected_bytes: c.pos() as u64,
            });
        }

        let expected_map = u64::from(n_wires) * 8;
        if map.len as u64 != expected_map {
            return Err(CircomError::SectionSize {
                kind: KIND,
                section: "wire-to-label map",
                offset: map.start as u64,
                declared_bytes: map.len as u64,
                expected_bytes: expected_map,
            });
        }
        let mut m = file.sub(map.start, map.len);
        let mut wire_to_label = Vec::with_capacity(n_wires as usize);
        for w in 0..n_wires {
            wire_to_label.push(m.u64(&format!("label of wire {w}"))?);
        }
        check_labels(n_wires, n_labels, &wire_to_label)?;
        Ok(R1cs {
            n_wires,
            n_pub_out,
            n_pub_in,
            n_prv_in,
            n_labels,
            constraints,
            wire_to_label,
        })
    }

    /// An upper bound of what the parse of `bytes` holds at its peak (the parsed value's
    /// [`R1cs::heap_bytes`] plus the label check's scratch), from the headers alone (no
    /// allocation proportional to the file): lets a caller charge the parse before it runs. Errors are the ones [`R1cs::parse`] would report for the headers.
    pub fn parsed_bytes_bound(bytes: &[u8]) -> Result<u64, CircomError> {
        let (file, entries) = reader::sections(KIND, bytes, MAGIC, VERSION)?;
        let header = reader::require(KIND, &entries, SECTION_HEADER, "header")?;
        let cons = reader::require(KIND, &entries, SECTION_CONSTRAINTS, "constraints")?;
        let mut h = file.sub(header.start, header.len);
        reader::field(&mut h, KIND)?;
        let n_wires = u64::from(h.u32("wire count")?);
        // Skip the public/private counts and the label count to reach n_constraints.
        h.take(4 * 3 + 8, || "header counts".into())?;
        let m = u64::from(h.u32("constraint count")?);
        let cons_len = cons.len as u64;
        // The parser caps capacities by the bytes present: at most cons_len / 12
        // constraints and cons_len / TERM_BYTES terms.
        let n_constraints = m.min(cons_len / 12);
        let n_terms = cons_len / TERM_BYTES as u64;
        // The wire map (8 bytes a wire) and the label check's sorted copy of it (16).
        Ok(n_constraints * std::mem::size_of::<Constraint>() as u64
            + n_terms * std::mem::size_of::<Term>() as u64
            + n_wires * (8 + 16))
    }

    /// Heap bytes this value holds (vector capacities).
    pub fn heap_bytes(&self) -> u64 {
        let terms: usize = self
            .constraints
            .iter()
            .map(|c| c.a.capacity() + c.b.capacity() + c.c.capacity())
            .sum();
        (self.constraints.capacity() * std::mem::size_of::<Constraint>()
            + terms * std::mem::size_of::<Term>()
            + self.wire_to_label.capacity() * 8) as u64
    }

    /// The `.r1cs` encoding (header, constraints, wire map, in that order).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut header = Vec::new();
        put_field(&mut header);
        for v in [self.n_wires, self.n_pub_out, self.n_pub_in, self.n_prv_in] {
            header.extend_from_slice(&v.to_le_bytes());
        }
        header.extend_from_slice(&self.n_labels.to_le_bytes());
        header.extend_from_slice(&(self.constraints.len() as u32).to_le_bytes());
        let mut cons = Vec::new();
        for c in &self.constraints {
            for lc in [&c.a, &c.b, &c.c] {
                cons.extend_from_slice(&(lc.len() as u32).to_le_bytes());
                for t in lc {
                    cons.extend_from_slice(&t.wire.to_le_bytes());
                    cons.extend_from_slice(&t.coeff.to_bytes());
                }
            }
        }
        let map: Vec<u8> = self
            .wire_to_label
            .iter()
            .flat_map(|l| l.to_le_bytes())
            .collect();
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC.as_bytes());
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&3u32.to_le_bytes());
        put_section(&mut out, SECTION_HEADER, &header);
        put_section(&mut out, SECTION_CONSTRAINTS, &cons);
        put_section(&mut out, SECTION_WIRE_MAP, &map);
        out
    }

    /// Wires, the constant one included.
    pub fn n_wires(&self) -> u32 {
        self.n_wires
    }
    /// Public outputs (wires 1..=n_pub_out).
    pub fn n_pub_out(&self) -> u32 {
        self.n_pub_out
    }
    /// Public inputs (the wires after the outputs).
    pub fn n_pub_in(&self) -> u32 {
        self.n_pub_in
    }
    /// Private inputs (the wires after the public ones).
    pub fn n_prv_in(&self) -> u32 {
        self.n_prv_in
    }
    /// Public values of a proof: outputs then inputs (the constant one excluded).
    pub fn n_public(&self) -> u32 {
        // Fits: checked against n_wires (a u32) on construction.
        self.n_pub_out + self.n_pub_in
    }
    /// Labels of the circuit's symbol table.
    pub fn n_labels(&self) -> u64 {
        self.n_labels
    }
    /// The constraints, in file order.
    pub fn constraints(&self) -> &[Constraint] {
        &self.constraints
    }
    /// Label of each wire.
    pub fn wire_to_label(&self) -> &[u64] {
        &self.wire_to_label
    }

    /// Checks a witness against this system: length, wire 0 = 1, then every constraint
    /// in order; the first failing one is named. Cost: one pass over the terms.
    pub fn check_witness(&self, witness: &[Scalar]) -> Result<(), CircomError> {
        if witness.len() as u64 != u64::from(self.n_wires) {
            return Err(CircomError::WitnessLength {
                expected: u64::from(self.n_wires),
                found: witness.len() as u64,
            });
        }
        if witness.first() != Some(&Scalar::ONE) {
            return Err(CircomError::WitnessOne {
                found: witness
                    .first()
                    .map_or_else(|| "absent".into(), scalar_to_decimal),
            });
        }
        for (i, c) in self.constraints.iter().enumerate() {
            if eval(&c.a, witness) * eval(&c.b, witness) != eval(&c.c, witness) {
                return Err(CircomError::Unsatisfied {
                    constraint: i as u64,
                    n_constraints: self.constraints.len() as u64,
                });
            }
        }
        Ok(())
    }

    /// The public values of a witness: outputs then inputs. The witness must have been
    /// checked (its length at least).
    pub fn public_values(&self, witness: &[Scalar]) -> Vec<Scalar> {
        witness
            .iter()
            .skip(1)
            .take(self.n_public() as usize)
            .copied()
            .collect()
    }
}
