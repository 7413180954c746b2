//! Naive oracles: obviously correct, slow (one full scalar multiplication per term).
//! Used by this crate's tests and by the GPU backend's tests.

use bls12_381::Scalar;
use group::Curve;

use crate::DensityMask;

/// `Σ scalars[i]·base(i)` by plain scalar multiplication, with the same pairing of
/// scalars to bases as [`crate::MsmBackend`]. Panics if the shapes disagree (a test
/// oracle, not an API).
pub fn naive_msm<G>(bases: &[G::Affine], scalars: &[Scalar], density: Option<&DensityMask>) -> G
where
    G: Curve<Scalar = Scalar>,
{
    let mut acc = G::identity();
    let mut next_base = 0;
    for (i, s) in scalars.iter().enumerate() {
        if density.is_some_and(|m| !m.get(i)) {
            continue;
        }
        acc += bases[next_base] * s;
        next_base += 1;
    }
    assert_eq!(next_base, bases.len(), "every base must be used");
    acc
}
