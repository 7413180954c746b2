//! Host-side staging of the GPU backend: a, b and c lent to the prover in the pool's
//! pinned buffers, and the MSM scalars written as canonical words into pooled pinned
//! buffers and copied to the device on the copy stream.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bls12_381::Scalar;
use bls_repr::FrRepr;
use cudarc::driver::{CudaEvent, CudaStream};
use gpu_device::{CudaPinned, GpuError, PoolError, Pooled};
use gpu_msm::{DeviceScalars, GpuMsmError};
use rayon::prelude::*;

use super::h_step::DeviceH;
use super::{gpu_msm_err, ntt_err, GpuBackend};
use crate::backend::{AbcStorage, BackendH, BackendOwned, HPoly, Part};
use crate::ProverError;
use gpu_ntt::GpuNttError;

/// u64 limbs of one scalar in a staging buffer (canonical for the MSMs, Montgomery for
/// the H step; either way the 8 little-endian u32 words the device reads).
pub(super) const SCALAR_LIMBS: usize = 4;

/// `dst[i]` = `src[i]` in bls-repr's Montgomery layout (what gpu-ntt reads), in parallel.
pub(super) fn reprs_into(dst: &mut [FrRepr], src: &[Scalar]) {
    dst.par_iter_mut()
        .zip(src.par_iter())
        .for_each(|(d, s)| *d = FrRepr::from_scalar(s));
}

/// Writes the concatenated parts (each filtered by its mask) as canonical limbs into the
/// start of `out`; returns the number of scalars written.
pub(super) fn write_parts(out: &mut [u64], parts: &[Part<'_>]) -> usize {
    // A limb is two of the device's little-endian u32 words, low first: the same bytes.
    let words: &mut [u32] = bytemuck::cast_slice_mut(out);
    let mut n = 0;
    for (scalars, mask) in parts {
        n += gpu_msm::select_scalar_words_into(&mut words[2 * SCALAR_LIMBS * n..], scalars, *mask);
    }
    n
}

pub(super) fn staging_err(what: &'static str) -> impl FnOnce(PoolError) -> ProverError {
    move |source| ProverError::Staging { what, source }
}

/// One pinned staging buffer from the GPU backend's pool.
pub(super) type PinnedBuf = Pooled<CudaPinned<u64>>;

/// The pinned a, b, c buffers that h kept (see `DeviceH::abc`), taken out of it: none
/// when h is not the GPU's or kept none.
pub(super) fn take_held_abc(h: HPoly) -> (HPoly, Vec<PinnedBuf>) {
    match h {
        HPoly::Backend(d) => match d.downcast::<DeviceH>() {
            Ok(mut d) => {
                let held = d.abc.take().map_or_else(Vec::new, |abc| abc.bufs.into());
                (HPoly::Backend(BackendH::new(d.n_coeffs, d)), held)
            }
            Err(other) => (HPoly::Backend(other), Vec::new()),
        },
        other => (other, Vec::new()),
    }
}

/// Pinned buffers from the GPU backend's staging pool that the prover evaluates a, b and
/// c into directly (bls-repr's Montgomery layout, `m` elements each). Dropping them
/// returns them to the pool.
pub(super) struct PinnedAbc {
    pub(super) bufs: [PinnedBuf; 3],
    pub(super) m: usize,
}

impl BackendOwned for PinnedAbc {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

impl AbcStorage for PinnedAbc {
    fn slices_mut(&mut self) -> Result<[&mut [FrRepr]; 3], ProverError> {
        let m = self.m;
        let [a, b, c] = &mut self.bufs;
        Ok([repr_view(a, m)?, repr_view(b, m)?, repr_view(c, m)?])
    }
}

/// The first `m` elements of a pooled buffer as field elements (after its copies).
fn repr_view(buf: &mut Pooled<CudaPinned<u64>>, m: usize) -> Result<&mut [FrRepr], ProverError> {
    let words = buf
        .as_mut_slice()
        .map_err(|e| ntt_err(GpuNttError::Gpu(e)))?;
    let found = words.len();
    let words = words.get_mut(..SCALAR_LIMBS * m).ok_or_else(|| {
        ntt_err(GpuNttError::Gpu(GpuError::LengthMismatch {
            what: "a, b, c staging buffer (u64 words)",
            expected: SCALAR_LIMBS * m,
            found,
        }))
    })?;
    Ok(bytemuck::cast_slice_mut(words))
}

/// Whether a, b and c of a domain of `m` points go into the pool's pinned buffers: when
/// its size classes hold exactly `m` elements (gpu-ntt takes the domain from the buffers'
/// length), true for the prover's a, b, c, padded to the power of two m.
pub(super) fn stages(m: usize) -> bool {
    let limbs = SCALAR_LIMBS * m;
    m.is_power_of_two() && gpu_device::size_class(limbs) == limbs
}

impl GpuBackend {
    /// Pooled pinned buffers for a, b and c of a domain of `m` points (see [`stages`]),
    /// paid from `from` when given (see `ProverBackend::staging_bytes`).
    pub(super) fn pinned_abc(
        &self,
        m: usize,
        mut from: Option<&mut memory_budget::Reservation>,
    ) -> Result<Option<PinnedAbc>, ProverError> {
        let limbs = SCALAR_LIMBS * m;
        if !stages(m) {
            return Ok(None);
        }
        let mut acquire = || {
            match from.as_deref_mut() {
                Some(r) => self.pool.acquire_from(limbs, r),
                None => self.pool.acquire(limbs),
            }
            .map_err(staging_err("a, b, c"))
        };
        Ok(Some(PinnedAbc {
            bufs: [acquire()?, acquire()?, acquire()?],
            m,
        }))
    }

    /// Stages the scalars of `dst` (the parts concatenated, each filtered by its mask):
    /// canonical limbs written straight into a pinned buffer, one of `held` large enough
    /// (the proof's own, e.g. its a, b, c buffers after the H step) or else one from the
    /// pool paid from `from`, then an asynchronous copy into `dst` on `copy_stream`. The
    /// staging buffer goes back to the pool at once (the pool waits for the copy before
    /// reusing it). Returns an event
    /// recorded after the copy, for the MSM to wait on, the host time spent and the part
    /// of it spent waiting for the staging buffer.
    pub(super) fn stage(
        &self,
        query: &'static str,
        parts: &[Part<'_>],
        dst: &mut DeviceScalars,
        copy_stream: &Arc<CudaStream>,
        (held, from): (&mut Vec<PinnedBuf>, &mut memory_budget::Reservation),
    ) -> Result<(CudaEvent, Duration, Duration), ProverError> {
        let t = Instant::now();
        let n = dst.len();
        let limbs = SCALAR_LIMBS * n;
        let gpu_err = |e: GpuError| gpu_msm_err(query)(GpuMsmError::Gpu(e));
        let mut staging = match held.iter().position(|b| b.len() >= limbs) {
            Some(i) => held.swap_remove(i),
            None => self
                .pool
                .acquire_from(limbs, from)
                .map_err(staging_err(query))?,
        };
        let host = staging.as_mut_slice().map_err(gpu_err)?;
        let waited = t.elapsed();
        let written = write_parts(host, parts);
        if written != n {
            return Err(gpu_msm_err(query)(GpuMsmError::LengthMismatch {
                n_bases: n,
                n_scalars: written,
            }));
        }
        staging
            .copy_to_device(0..limbs, dst.words_mut(), 0, copy_stream)
            .map_err(gpu_err)?;
        let copied = copy_stream.record_event(None).map_err(|c| {
            gpu_err(GpuError::Driver {
                call: "cuEventRecord",
                code: c,
            })
        })?;
        Ok((copied, t.elapsed(), waited))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::test_seed as seed;
    use crate::testing::SplitMix;
    use gpu_msm::DensityMask;

    /// Per element and serially: filter the scalars by the mask, then each one's canonical
    /// bytes as little-endian u32 words, part after part.
    fn reference_words(parts: &[Part<'_>]) -> Vec<u32> {
        let mut words = Vec::new();
        for (scalars, mask) in parts {
            for (i, s) in scalars.iter().enumerate() {
                if mask.is_none_or(|m| m.get(i)) {
                    let b = s.to_bytes();
                    words.extend(
                        b.chunks_exact(4)
                            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])),
                    );
                }
            }
        }
        words
    }

    fn scalars(g: &mut SplitMix, n: usize) -> Vec<Scalar> {
        (0..n)
            .map(|_| match g.below(4) {
                // Zeros and ones are what the masks and fast paths meet most.
                0 => Scalar::zero(),
                1 => Scalar::one(),
                _ => g.scalar(),
            })
            .collect()
    }

    /// A mask of `len` bits, each set with probability `per_mille`/1000.
    fn mask(g: &mut SplitMix, len: usize, per_mille: usize) -> DensityMask {
        DensityMask::from_bools((0..len).map(|_| g.below(1000) < per_mille))
    }

    /// Limbs as the u32 words the device reads (little-endian halves, low first).
    fn as_words(limbs: &[u64]) -> Vec<u32> {
        limbs
            .iter()
            .flat_map(|l| [*l as u32, (*l >> 32) as u32])
            .collect()
    }

    #[test]
    fn parts_match_per_msm_conversion() {
        let mut g = SplitMix::new(seed());
        for (n_in, n_aux) in [(1usize, 0usize), (1, 1), (3, 70), (2, 5000), (70, 9000)] {
            let n_h = 1 + g.below(5000);
            let h = scalars(&mut g, n_h);
            let inputs = scalars(&mut g, n_in);
            let aux = scalars(&mut g, n_aux);
            let density = g.below(1001);
            let a_aux = mask(&mut g, n_aux, density);
            let b_input = mask(&mut g, n_in, 1000 - density);
            let b_aux = mask(&mut g, n_aux, 500);
            let cases: [(&str, usize, Vec<Part<'_>>); 4] = [
                ("h", n_h, vec![(&h, None)]),
                ("l", n_aux, vec![(&aux, None)]),
                (
                    "a",
                    n_in + a_aux.count_ones(),
                    vec![(&inputs, None), (&aux, Some(&a_aux))],
                ),
                (
                    "b_g1",
                    b_input.count_ones() + b_aux.count_ones(),
                    vec![(&inputs, Some(&b_input)), (&aux, Some(&b_aux))],
                ),
            ];
            for (name, n, parts) in &cases {
                // A staging buffer is a size class: longer than the scalars.
                let mut out = vec![u64::MAX; gpu_device::size_class(SCALAR_LIMBS * n)];
                assert_eq!(write_parts(&mut out, parts), *n, "{name}");
                assert_eq!(
                    as_words(&out[..SCALAR_LIMBS * n]),
                    reference_words(parts),
                    "{name} with {n_in} inputs, {n_aux} aux"
                );
            }
        }
    }

    #[test]
    fn montgomery_limbs_are_bls_repr() {
        let mut g = SplitMix::new(seed());
        let s = scalars(&mut g, 9000);
        let mut out = vec![FrRepr::ZERO; s.len() + 1];
        reprs_into(&mut out, &s);
        for (i, x) in s.iter().enumerate() {
            assert_eq!(out[i].to_scalar().unwrap(), *x, "element {i}");
        }
        assert_eq!(out[s.len()], FrRepr::ZERO, "nothing past the scalars");
    }
}
