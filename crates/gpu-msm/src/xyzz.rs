//! Points in XYZZ coordinates read back from the GPU, made into curve points on the host.
//!
//! XYZZ ("extended Jacobian"): `(X, Y, ZZ, ZZZ)` stands for the affine point
//! `(X / ZZ, Y / ZZZ)` with `ZZ^3 = ZZZ^2`, and for infinity when `ZZ = 0`. The GPU used to
//! make its window sums affine itself, one Fermat inversion per point on one thread each
//! (about 1 ms of serial latency per MSM); here all the denominators of a batch share one
//! inversion (Montgomery's trick: 3 multiplications each), which takes microseconds.

use bytemuck::Pod;

use crate::affine::{batch_invert, BaseField, ReprCurve};

/// Why a point read back from the device was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum XyzzError {
    /// A coordinate is not a reduced field element.
    NotReduced { index: usize },
    /// `ZZ` is not zero but `ZZZ` is (not a point in these coordinates).
    ZeroDenominator { index: usize },
}

/// A coordinate field the device writes as little-endian u32 limbs (Montgomery form).
pub(crate) trait DeviceField: BaseField + Pod {
    /// u32 words per element.
    const WORDS: usize;
    fn is_reduced(&self) -> bool;
}

impl DeviceField for bls_repr::FpRepr {
    const WORDS: usize = 12;
    fn is_reduced(&self) -> bool {
        bls_repr::FpRepr::is_reduced(self)
    }
}

impl DeviceField for bls_repr::Fp2Repr {
    const WORDS: usize = 24;
    fn is_reduced(&self) -> bool {
        bls_repr::Fp2Repr::is_reduced(self)
    }
}

/// Curve points from `4 * F::WORDS` u32 words per point (X, Y, ZZ, ZZZ), with one shared
/// inversion. `words.len()` must be a multiple of `4 * F::WORDS`.
pub(crate) fn xyzz_words_to_curve<C>(words: &[u32]) -> Result<Vec<C>, XyzzError>
where
    C: ReprCurve,
    C::F: DeviceField,
{
    let w = <C::F as DeviceField>::WORDS;
    let points: Vec<[C::F; 4]> = words
        .chunks_exact(4 * w)
        .map(|p| {
            std::array::from_fn(|k| {
                bytemuck::pod_read_unaligned::<C::F>(bytemuck::cast_slice(&p[k * w..(k + 1) * w]))
            })
        })
        .collect();
    xyzz_to_curve::<C>(&points)
}

/// Curve points from XYZZ coordinates `[X, Y, ZZ, ZZZ]`, with one shared inversion.
pub(crate) fn xyzz_to_curve<C>(points: &[[C::F; 4]]) -> Result<Vec<C>, XyzzError>
where
    C: ReprCurve,
    C::F: DeviceField,
{
    let mut dens = Vec::with_capacity(2 * points.len());
    for (index, p) in points.iter().enumerate() {
        if !p.iter().all(DeviceField::is_reduced) {
            return Err(XyzzError::NotReduced { index });
        }
        if !p[2].is_zero() {
            if p[3].is_zero() {
                return Err(XyzzError::ZeroDenominator { index });
            }
            dens.push(p[2]);
            dens.push(p[3]);
        }
    }
    batch_invert(&mut dens, &mut Vec::new());
    let mut inv = dens.chunks_exact(2);
    Ok(points
        .iter()
        .map(|p| {
            if p[2].is_zero() {
                C::identity()
            } else {
                let d = inv.next().expect("one pair per finite point");
                C::from_xy(p[0].mul(&d[0]), p[1].mul(&d[1]))
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bls12_381::{G1Projective, G2Projective, Scalar};
    use bls_repr::{Fp2Repr, FpRepr};
    use ff::Field;
    use group::Curve;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn seed() -> u64 {
        let s = std::env::var("PINION_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(7, |d| d.as_nanos() as u64)
            });
        eprintln!("seed = {s}");
        s
    }

    /// XYZZ of `p` with a random non-zero lambda: (x l^2, y l^3, l^2, l^3).
    fn to_xyzz<C: ReprCurve>(p: &C, lambda: C::F) -> [C::F; 4]
    where
        C::Affine: crate::affine::MsmBase<Curve = C>,
    {
        use crate::affine::MsmBase;
        match p.to_affine().xy() {
            None => [C::F::ONE, C::F::ONE, C::F::ZERO, C::F::ZERO],
            Some((x, y)) => {
                let l2 = lambda.square();
                let l3 = l2.mul(&lambda);
                [x.mul(&l2), y.mul(&l3), l2, l3]
            }
        }
    }

    fn fp(rng: &mut StdRng) -> FpRepr {
        // A random non-zero element: a curve coordinate of a random point.
        let p = G1Projective::generator() * Scalar::random(&mut *rng);
        crate::affine::MsmBase::xy(&p.to_affine()).unwrap().0
    }

    #[test]
    fn g1_and_g2_points_round_trip_through_xyzz() {
        let mut rng = StdRng::seed_from_u64(seed());
        let g1: Vec<G1Projective> = (0..20)
            .map(|i| {
                if i % 7 == 3 {
                    G1Projective::identity()
                } else {
                    G1Projective::generator() * Scalar::random(&mut rng)
                }
            })
            .collect();
        let xyzz: Vec<[FpRepr; 4]> = g1.iter().map(|p| to_xyzz(p, fp(&mut rng))).collect();
        assert_eq!(xyzz_to_curve::<G1Projective>(&xyzz).unwrap(), g1);
        let words: Vec<u32> = xyzz
            .iter()
            .flat_map(|p| bytemuck::cast_slice::<_, u32>(p).to_vec())
            .collect();
        assert_eq!(xyzz_words_to_curve::<G1Projective>(&words).unwrap(), g1);

        let g2: Vec<G2Projective> = (0..9)
            .map(|i| {
                if i == 4 {
                    G2Projective::identity()
                } else {
                    G2Projective::generator() * Scalar::random(&mut rng)
                }
            })
            .collect();
        let xyzz: Vec<[Fp2Repr; 4]> = g2
            .iter()
            .map(|p| {
                to_xyzz(
                    p,
                    Fp2Repr {
                        c0: fp(&mut rng),
                        c1: fp(&mut rng),
                    },
                )
            })
            .collect();
        let words: Vec<u32> = xyzz
            .iter()
            .flat_map(|p| bytemuck::cast_slice::<_, u32>(p).to_vec())
            .collect();
        assert_eq!(xyzz_words_to_curve::<G2Projective>(&words).unwrap(), g2);
        assert!(xyzz_to_curve::<G2Projective>(&[]).unwrap().is_empty());
    }

    #[test]
    fn bad_device_points_are_errors() {
        let mut rng = StdRng::seed_from_u64(seed());
        let ok = to_xyzz(&G1Projective::generator(), fp(&mut rng));
        let mut zero_zzz = ok;
        zero_zzz[3] = FpRepr::ZERO;
        assert_eq!(
            xyzz_to_curve::<G1Projective>(&[ok, zero_zzz]),
            Err(XyzzError::ZeroDenominator { index: 1 })
        );
        let mut unreduced = ok;
        unreduced[0].limbs = [u64::MAX; 6];
        assert_eq!(
            xyzz_to_curve::<G1Projective>(&[unreduced]),
            Err(XyzzError::NotReduced { index: 0 })
        );
    }
}
