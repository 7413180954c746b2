//! Where one query's MSM runs on the GPU backend, from where the key's bases live: bases
//! on this device are summed in place (a prefix of the store's device-tier buffer),
//! bases in host memory (the store's pinned or host tier) are streamed to the device in
//! chunks, `bls12_381` points (in-memory `groth16::Parameters`) are converted once per
//! proof into a charged host copy and streamed. The backend keeps no bases of its own.

use gpu_msm::{DeviceBasesView, DeviceScalars, GpuCurve, GpuMsm, GpuMsmError};
use memory_budget::Reservation;
use rayon::prelude::*;

use super::GpuBackend;
use crate::backend::BasesKind;
use crate::key::QueryBases;
use crate::ProverError;

/// Bases per chunk when a G1 query is streamed from host memory (two chunks of VRAM:
/// 768 MiB). Large enough that each chunk's own bucket reduction stays a small part.
pub(super) const STREAM_CHUNK_G1: usize = 1 << 22;
/// The same for G2 (two chunks: 768 MiB).
pub(super) const STREAM_CHUNK_G2: usize = 1 << 21;

/// How the device reaches one query's bases for one proof.
pub(super) enum GpuBases<'a, C: GpuCurve> {
    /// On this device (the store's device tier).
    Resident(DeviceBasesView<'a, C>),
    /// In host memory, streamed per chunk (the store's pinned or host tier).
    Streamed(&'a [C::Repr]),
    /// Converted from `bls12_381` points for this proof, charged while it lives.
    Converted {
        /// The points in bls-repr's layout.
        bases: Vec<C::Repr>,
        /// Charges them while they live.
        _charge: Reservation,
    },
}

/// Where a query's sum is computed, and how many of its bases the proof uses.
pub(super) enum Placed<'a, C: GpuCurve> {
    /// On the device.
    Gpu(GpuBases<'a, C>),
    /// On the CPU, reading the bases where they are (the device could not take them).
    Cpu,
}

impl<C: GpuCurve> GpuBases<'_, C> {
    /// `Σ scalars[i]·bases[i]` over the first `scalars.len()` bases, on `msm`'s stream.
    pub(super) fn msm(
        &self,
        msm: &GpuMsm,
        scalars: &DeviceScalars,
        chunk_len: usize,
    ) -> Result<C::Projective, GpuMsmError> {
        match self {
            GpuBases::Resident(b) => msm.msm_resident_prefix(b, scalars),
            GpuBases::Streamed(b) => msm.msm_streamed_host::<C>(b, scalars, chunk_len),
            GpuBases::Converted { bases, .. } => {
                msm.msm_streamed_host::<C>(bases, scalars, chunk_len)
            }
        }
    }

    /// Short name for the proof's report.
    pub(super) fn kind(&self) -> BasesKind {
        match self {
            GpuBases::Resident(_) => BasesKind::Resident,
            GpuBases::Streamed(_) | GpuBases::Converted { .. } => BasesKind::Streamed,
        }
    }
}

impl GpuBackend {
    /// How the device reaches the first `n` of `bases` (a query of the proof's key view).
    pub(super) fn place<'a, C: GpuCurve>(
        &self,
        query: &'static str,
        bases: &QueryBases<'a, C>,
        n: usize,
    ) -> Result<Placed<'a, C>, ProverError> {
        if bases.len() < n {
            return Err(ProverError::KeyTooSmall {
                query,
                needed: n,
                found: bases.len(),
            });
        }
        Ok(match bases {
            QueryBases::Device {
                limbs,
                n_points,
                ordinal,
            } => {
                if *ordinal != self.gpu.info().ordinal {
                    return Err(ProverError::BackendUnavailable {
                        backend: "gpu",
                        reason: "the parameter bases are on another device",
                    });
                }
                let view = DeviceBasesView::<C>::from_limbs(limbs, *n_points)
                    .map_err(super::gpu_msm_err(query))?;
                Placed::Gpu(GpuBases::Resident(view))
            }
            QueryBases::Host(b) => Placed::Gpu(GpuBases::Streamed(b)),
            QueryBases::Affine(points) => {
                let bytes = (C::AFFINE_WORDS * 4 * n) as u64;
                match self.transient(bytes, "bls-repr copy of in-memory parameter bases") {
                    Ok(charge) => {
                        let bases = points[..n].par_iter().map(C::to_repr).collect();
                        Placed::Gpu(GpuBases::Converted {
                            bases,
                            _charge: charge,
                        })
                    }
                    // No room for the copy: the CPU reads the points as they are.
                    Err(_) => Placed::Cpu,
                }
            }
        })
    }
}
