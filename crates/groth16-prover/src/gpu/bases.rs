//! Where one query's MSM runs on the GPU backend, from where the key's bases live: bases
//! on this device are summed in place (a prefix of the store's device-tier buffer),
//! bases in host memory (the store's pinned or host tier) are streamed to the device in
//! chunks, `bls12_381` points (in-memory `groth16::Parameters`) are converted once per
//! proof into a charged host copy and streamed. A query the device refuses is summed on
//! the CPU: over host bases where they are, over device-tier bases from a charged host
//! copy of the prefix it uses. The backend keeps no bases of its own.

use std::sync::Arc;

use gpu_device::Gpu;
use gpu_msm::{
    DeviceBases, DeviceBasesView, DeviceScalars, G1Curve, GpuCurve, GpuMsm, GpuMsmError, MsmBase,
    PrecomputedBases, PrecomputedBasesG1,
};
use memory_budget::Reservation;
use rayon::prelude::*;

use super::{gpu_msm_err, GpuBackend};
use crate::backend::{cpu_sum, BasesKind, Part};
use crate::key::{G1Query, QueryBases};
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
    /// A table of precomputed windows made from the device tier's bases (the backend keeps
    /// it across proofs of the same key).
    Precomputed(Arc<PrecomputedBases<C>>),
    /// A sparse query's device-tier bases laid out one per scalar for this proof
    /// (infinity where the query has none: `GpuMsm::expand_bases_g1_with`).
    Expanded(DeviceBases<C>),
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
    /// On the CPU (the device could not take them): [`GpuBackend::cpu_fallback_sum`].
    Cpu,
}

impl<C: GpuCurve> GpuBases<'_, C> {
    /// The sums of `self` and `other` over the first `scalars.len()` bases of each, on
    /// `msm`'s stream: over one sort of the scalars where both are read alike (device
    /// views, or tables of the same window and row length), else one MSM each.
    pub(super) fn msm_with(
        &self,
        other: &GpuBases<'_, C>,
        msm: &GpuMsm,
        scalars: &DeviceScalars,
        chunk_len: usize,
    ) -> Result<[C::Projective; 2], GpuMsmError> {
        let sums = match (self, other) {
            (GpuBases::Resident(a), GpuBases::Resident(b)) => {
                msm.msm_resident_prefix_many(&[a, b], scalars)?
            }
            (GpuBases::Resident(a), GpuBases::Expanded(b)) => {
                msm.msm_resident_prefix_many(&[a, &b.view()], scalars)?
            }
            (GpuBases::Precomputed(a), GpuBases::Precomputed(b))
                if (a.window_bits(), a.len()) == (b.window_bits(), b.len()) =>
            {
                msm.msm_precomputed_many(&[a, b], scalars)?
            }
            _ => {
                return Ok([
                    self.msm(msm, scalars, chunk_len)?,
                    other.msm(msm, scalars, chunk_len)?,
                ])
            }
        };
        // One sum a set of bases, in order.
        Ok([sums[0], sums[1]])
    }

    /// `Σ scalars[i]·bases[i]` over the first `scalars.len()` bases, on `msm`'s stream.
    pub(super) fn msm(
        &self,
        msm: &GpuMsm,
        scalars: &DeviceScalars,
        chunk_len: usize,
    ) -> Result<C::Projective, GpuMsmError> {
        match self {
            GpuBases::Resident(b) => msm.msm_resident_prefix(b, scalars),
            GpuBases::Precomputed(t) => msm.msm_precomputed(t, scalars),
            GpuBases::Expanded(b) => msm.msm_resident_prefix(&b.view(), scalars),
            GpuBases::Streamed(b) => msm.msm_streamed_host::<C>(b, scalars, chunk_len),
            GpuBases::Converted { bases, .. } => {
                msm.msm_streamed_host::<C>(bases, scalars, chunk_len)
            }
        }
    }

    /// Short name for the proof's report.
    pub(super) fn kind(&self) -> BasesKind {
        match self {
            GpuBases::Resident(_) | GpuBases::Expanded(_) => BasesKind::Resident,
            GpuBases::Precomputed(_) => BasesKind::Precomputed,
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

impl GpuBackend {
    /// `Σ scalars·bases` over the first `n` of `bases` on the CPU, for a query the device
    /// refused (`parts` as [`cpu_sum`] takes them), its host memory charged first
    /// (`cpu_fallback_charge`: `host_bytes`, the scalars' and scratch's, plus, for device
    /// bases, their copy). Host
    /// bases are read where they are. The CPU cannot read VRAM, so bases on this device
    /// (the store's device tier) are copied back first, the `n` points only, through
    /// `through`'s stream (the caller's, so the copy does not wait for other streams'
    /// MSMs): slower than the device, but the proof completes. Bases on another device
    /// are refused, as [`GpuBackend::place`] refuses them.
    pub(super) fn cpu_fallback_sum<C: GpuCurve>(
        &self,
        through: &Gpu,
        query: &'static str,
        bases: &QueryBases<'_, C>,
        n: usize,
        host_bytes: u64,
        parts: &[Part<'_>],
    ) -> Result<C::Projective, ProverError>
    where
        C::Affine: MsmBase<Curve = C::Projective>,
        C::Repr: MsmBase<Curve = C::Projective>,
    {
        let QueryBases::Device {
            limbs,
            n_points,
            ordinal,
        } = bases
        else {
            let _charge = self.cpu_fallback_charge(host_bytes)?;
            return cpu_sum(&self.cpu, query, bases, parts);
        };
        if *ordinal != through.info().ordinal {
            return Err(ProverError::BackendUnavailable {
                backend: "gpu",
                reason: "the parameter bases are on another device",
            });
        }
        if *n_points < n {
            return Err(ProverError::KeyTooSmall {
                query,
                needed: n,
                found: *n_points,
            });
        }
        // bls-repr's layout as u64 limbs, as `DeviceBasesView::from_limbs` reads them.
        let bad_bases = || {
            gpu_msm_err(query)(GpuMsmError::BadDeviceBases {
                n_points: n,
                n_limbs: limbs.len(),
                words_per_point: C::AFFINE_WORDS,
            })
        };
        let n_limbs = n
            .checked_mul(C::AFFINE_WORDS)
            .map(|words| words.div_ceil(2))
            .filter(|&l| l <= limbs.len())
            .ok_or_else(bad_bases)?;
        let copy_bytes = 8 * n_limbs as u64;
        let _charge = self.cpu_fallback_charge(host_bytes + copy_bytes)?;
        let mut copy = vec![0u64; n_limbs];
        through
            .copy_prefix_to_host(limbs, &mut copy)
            .map_err(|e| gpu_msm_err(query)(GpuMsmError::Gpu(e)))?;
        let host: &[C::Repr] = bytemuck::try_cast_slice(&copy).map_err(|_| bad_bases())?;
        cpu_sum(&self.cpu, query, &QueryBases::<C>::Host(host), parts)
    }
}

/// What a table of precomputed windows is made from.
pub(super) enum TableSource<'v, 'a> {
    /// A query's bases as they are.
    Whole(&'v DeviceBasesView<'a, G1Curve>),
    /// A sparse query's bases (`compact`, after its inputs) laid out one per scalar of
    /// `mask` and infinity elsewhere, `len` points in all
    /// ([`gpu_msm::GpuMsm::expand_bases_g1`]): a's aux part over l's rows.
    Expanded {
        compact: &'v DeviceBasesView<'a, G1Curve>,
        mask: &'v gpu_msm::DensityMask,
        len: usize,
    },
}

impl TableSource<'_, '_> {
    /// `None` for a whole query; for an expanded one its length and mask's fingerprint
    /// (a key proved for another circuit, with another density, gets its table anew).
    fn tag(&self) -> Option<u64> {
        match self {
            TableSource::Whole(_) => None,
            TableSource::Expanded { mask, len, .. } => {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                (mask.len(), mask.count_ones(), *len).hash(&mut h);
                mask.words().hash(&mut h);
                Some(h.finish())
            }
        }
    }

    /// Rows the table needs.
    fn len(&self) -> usize {
        match self {
            TableSource::Whole(v) => v.len(),
            TableSource::Expanded { len, .. } => *len,
        }
    }
}

/// The tables of precomputed windows a backend keeps ([`GpuBackend::with_precomputed_windows`]):
/// those of one key (the last one proved), one per G1 query, built from its device-tier
/// bases on first use and charged to the VRAM budget while they live. Once the budget
/// refuses one of a key's tables, no more are asked for that key (the queries without a
/// table read their bases in place).
#[derive(Default)]
pub(super) struct PrecomputedTables {
    key_id: Option<u64>,
    /// Each query's table and what it was made from ([`TableSource::tag`]).
    tables: [Option<(Arc<PrecomputedBasesG1>, Option<u64>)>; 4],
    refused: bool,
}

impl PrecomputedTables {
    /// Device bytes the tables hold.
    pub(super) fn bytes(&self) -> u64 {
        self.tables
            .iter()
            .flatten()
            .map(|(t, _)| t.device_bytes())
            .sum()
    }
}

impl GpuBackend {
    /// The table of precomputed windows of query `q` of key `key_id` (made from
    /// `source`, the query's device-tier bases, on first use), or `None` when this backend
    /// makes none or the VRAM budget (or the device) cannot hold it. A table made from
    /// another source is made again.
    pub(super) fn precomputed_table(
        &self,
        key_id: u64,
        q: G1Query,
        source: TableSource<'_, '_>,
    ) -> Result<Option<Arc<PrecomputedBasesG1>>, ProverError> {
        let Some(bits) = self.precomputed_bits else {
            return Ok(None);
        };
        let (tag, len) = (source.tag(), source.len());
        let mut cache = super::lock(&self.precomputed);
        if cache.key_id != Some(key_id) {
            // Another key: its tables go (proofs still summing over them hold their own
            // references).
            *cache = PrecomputedTables {
                key_id: Some(key_id),
                ..PrecomputedTables::default()
            };
        }
        if let Some((t, from)) = &cache.tables[q as usize] {
            if *from == tag && t.len() >= len {
                return Ok(Some(t.clone()));
            }
        }
        // The tables made before a refusal stay in use; no more are asked for.
        if cache.refused {
            return Ok(None);
        }
        let made = match source {
            TableSource::Whole(view) => self.msm.precompute_windows_g1(view, bits),
            // The a query's bases one per aux variable (infinity where A has none) for
            // as long as the table takes to make.
            TableSource::Expanded { compact, mask, len } => self
                .msm
                .expand_bases_g1(compact, mask, len)
                .and_then(|e| self.msm.precompute_windows_g1(&e.view(), bits)),
        };
        match made {
            Ok(t) => {
                let t = Arc::new(t);
                cache.tables[q as usize] = Some((t.clone(), tag));
                Ok(Some(t))
            }
            Err(GpuMsmError::Gpu(e)) if e.is_vram_refusal() => {
                cache.refused = true;
                Ok(None)
            }
            Err(e) => Err(super::gpu_msm_err(q.name())(e)),
        }
    }
}
