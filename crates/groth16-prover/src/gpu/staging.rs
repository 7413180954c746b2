//! Host-side staging of the GPU backend: a, b and c lent to the prover in the pool's
//! pinned buffers; the witness copied to the device once (its limbs as they are, into a
//! pooled pinned buffer) and turned there into the l, a and b MSMs' scalars; h, when it
//! was left on the host, written as canonical words and copied on the copy stream.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bls12_381::Scalar;
use bls_repr::FrRepr;
use cudarc::driver::{CudaEvent, CudaStream};
use gpu_device::{CudaPinned, DeviceBuffer, GpuError, PoolError, Pooled};
use gpu_msm::{DensityMask, DeviceScalars, GpuMsm, GpuMsmError};
use rayon::prelude::*;

use super::h_step::{DeviceH, Kept};
use super::{gpu_msm_err, ntt_err, GpuBackend};
use crate::backend::{AbcStorage, BackendH, BackendOwned, HPoly, MsmInputs, Part};
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

/// Writes the parts' Montgomery limbs (what each `Scalar` holds: a plain copy) one after
/// another into the start of `out`, in parallel; returns the number of scalars written.
pub(super) fn write_montgomery(out: &mut [u64], parts: &[&[Scalar]]) -> usize {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let reprs: &mut [FrRepr] = bytemuck::cast_slice_mut(&mut out[..SCALAR_LIMBS * total]);
    let mut n = 0;
    for p in parts {
        reprs_into(&mut reprs[n..n + p.len()], p);
        n += p.len();
    }
    n
}

/// The witness on the device for one proof's l, a and b MSMs (see
/// [`GpuBackend::stage_witness`]), each ready once `ready` (on the copy stream) is.
pub(super) struct DeviceWitness {
    /// The witness, aux first then the inputs, canonical, truncated to the aux: l's
    /// scalars (none when l is not summed on the device).
    pub(super) l: Option<DeviceScalars>,
    /// `inputs ++ aux[a_aux]`, or the inputs alone when a's aux part is summed over l's
    /// scalars (none when A is not summed on the device, or has no inputs then).
    pub(super) a: Option<DeviceScalars>,
    /// `inputs[b_input] ++ aux[b_aux]`, shared by B on G1 and on G2 (none when empty).
    pub(super) b: Option<Arc<DeviceScalars>>,
    /// Events recorded on the copy stream after all of it: for the G1 MSMs' stream and
    /// for B on G2's.
    pub(super) g1_ready: CudaEvent,
    pub(super) g2_ready: CudaEvent,
    /// Host time spent, and the part of it spent waiting before the limbs could be
    /// written (device buffers, masks, staging buffer), with its first two parts.
    pub(super) host_time: Duration,
    pub(super) waited: Duration,
    pub(super) alloc_time: Duration,
    pub(super) masks_time: Duration,
}

/// B's scalars on the device for the G2 MSM, and the event after their staging.
pub(super) type StagedB = (Arc<DeviceScalars>, CudaEvent);

/// Which of the witness's device forms a proof needs.
#[derive(Clone, Copy, Debug)]
pub(super) struct WitnessNeeds {
    pub(super) l: bool,
    pub(super) a: bool,
    /// a's scalars are the inputs only: its aux part is summed over l's scalars (one
    /// sort for l and a: `GpuBackend::with_one_sort_l_a`).
    pub(super) a_inputs_only: bool,
    pub(super) b: bool,
}

pub(super) fn staging_err(what: &'static str) -> impl FnOnce(PoolError) -> ProverError {
    move |source| ProverError::Staging { what, source }
}

/// One pinned staging buffer from the GPU backend's pool.
pub(super) type PinnedBuf = Pooled<CudaPinned<u64>>;

/// What h kept for the MSMs (`DeviceH::kept`: pinned buffers, the witness left on the
/// device, the pending witness check, the evaluation's events), taken out of it, with a,
/// b, c's pinned buffers moved among the others (`Kept::held`): nothing when h is not the
/// GPU's or kept nothing.
pub(super) fn take_held_abc(h: HPoly) -> (HPoly, Kept) {
    match h {
        HPoly::Backend(d) => match d.downcast::<DeviceH>() {
            Ok(mut d) => {
                let mut kept = std::mem::replace(&mut d.kept, Kept::none());
                if let Some(abc) = kept.abc.take() {
                    kept.held.splice(0..0, abc.bufs);
                }
                (HPoly::Backend(BackendH::new(d.n_coeffs, d)), kept)
            }
            Err(other) => (HPoly::Backend(other), Kept::none()),
        },
        other => (other, Kept::none()),
    }
}

/// Pinned buffers from the GPU backend's staging pool that the prover evaluates a, b and
/// c into directly (bls-repr's Montgomery layout, `m` elements each). Dropping them
/// returns them to the pool.
pub(super) struct PinnedAbc {
    pub(super) bufs: [PinnedBuf; 3],
    pub(super) m: usize,
    /// a, b and c copied to the device ahead of the H step
    /// (`GpuBackend::prefetch_abc`), ready once the event (on the prefetch stream) is.
    pub(super) on_device: Option<([DeviceBuffer<u64>; 3], CudaEvent)>,
}

impl BackendOwned for PinnedAbc {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
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
    /// See `ProverBackend::prefetch_abc`: device buffers for a, b and c allocated on the
    /// prefetch stream and the pinned buffers copied into them there (each copy
    /// recorded on its pinned buffer, so the pool and host access wait for it).
    pub(super) fn prefetch_pinned(&self, p: &mut PinnedAbc) -> Result<bool, ProverError> {
        if p.on_device.is_some() {
            return Ok(true);
        }
        let gpu_err = |e: GpuError| ntt_err(GpuNttError::Gpu(e));
        let words = SCALAR_LIMBS * p.m;
        if !self.room_to_prefetch(3 * 8 * words as u64, p.m) {
            return Ok(false);
        }
        let stream = self.prefetch_stream()?;
        let on = self.gpu.with_stream(stream.clone());
        // No room now: the H step copies them itself (what was allocated is freed).
        let Some(mut dev) = super::pce::alloc_abc(&on, words, "(prefetched)")? else {
            return Ok(false);
        };
        for (buf, d) in p.bufs.iter_mut().zip(dev.iter_mut()) {
            buf.copy_to_device(0..words, d, 0, &stream)
                .map_err(gpu_err)?;
        }
        let copied = stream
            .record_event(None)
            .map_err(|c| super::driver_err("cuEventRecord", c))?;
        p.on_device = Some((dev, copied));
        Ok(true)
    }

    /// Whether the device has room for `bytes` copied ahead for a proof over a domain of
    /// `m` points, with room left for another proof's MSM scratch beside them: the proof
    /// on the device now may still allocate its own.
    pub(super) fn room_to_prefetch(&self, bytes: u64, m: usize) -> bool {
        let keep = m as u64 * super::HEADROOM_PER_TERM + super::HEADROOM_FIXED;
        self.gpu.vram_budget().available_bytes() >= bytes.saturating_add(keep)
    }

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
            on_device: None,
        }))
    }

    /// A pinned buffer for `limbs` staged limbs: one of `held` large enough (the proof's
    /// own, e.g. its a, b, c buffers after the H step) or else one from the pool paid from
    /// `from` (`as_mut_slice` then waits for its earlier copies).
    fn staging_buffer(
        &self,
        query: &'static str,
        limbs: usize,
        (held, from): (&mut Vec<PinnedBuf>, &mut memory_budget::Reservation),
    ) -> Result<PinnedBuf, ProverError> {
        match held.iter().position(|b| b.len() >= limbs) {
            Some(i) => Ok(held.swap_remove(i)),
            None => self
                .pool
                .acquire_from(limbs, from)
                .map_err(staging_err(query)),
        }
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
        let mut staging = self.staging_buffer(query, limbs, (held, from))?;
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
        let copied = record(copy_stream, query)?;
        Ok((copied, t.elapsed(), waited))
    }
}

impl GpuBackend {
    /// The proof's witness on the device, copied once for the l, a and b MSMs (on G1 and
    /// G2) instead of staging each query's scalars on the host: the Montgomery limbs of
    /// `aux ++ inputs` written into one pinned buffer (one of `held` when large enough,
    /// else one from the pool paid from `from`: see `msm_staging_after_abc`), copied on
    /// `copy_stream`, converted to canonical there and compacted by the density masks into
    /// a's and b's scalars, all queued on the copy stream so that it overlaps the H MSM.
    /// `Ok(None)` when the device has no room for the scalars (the CPU then sums l, a and
    /// b); any other failure is an error. `on_device`: the witness's Montgomery limbs
    /// already on the device (the H step evaluated a, b and c from them): converted in
    /// place instead of copied again.
    pub(super) fn stage_witness(
        &self,
        x: &MsmInputs<'_>,
        needs: WitnessNeeds,
        copy_stream: &Arc<CudaStream>,
        (held, from): (&mut Vec<PinnedBuf>, &mut memory_budget::Reservation),
        on_device: Option<(DeviceBuffer<u64>, CudaEvent)>,
    ) -> Result<Option<DeviceWitness>, ProverError> {
        const Q: &str = "witness";
        let t = Instant::now();
        let (n_in, n_aux) = (x.inputs.len(), x.aux.len());
        let n_w = n_in + n_aux;
        let n_a = match needs.a_inputs_only {
            true => n_in,
            false => n_in + x.a_aux.count_ones(),
        };
        let n_b = x.b_input.count_ones() + x.b_aux.count_ones();
        let copy = GpuMsm::new(self.gpu.with_stream(copy_stream.clone()));
        // Device buffers first: no room is a CPU fallback, decided before any copy.
        // Filled entirely below (the copy, the selections, whose counts are checked); no
        // fill queued, which would wait behind the kernels on the device.
        let alloc = |n: usize| match copy.alloc_scalars_for_overwrite(n) {
            Ok(d) => Ok(Some(d)),
            Err(e) if super::out_of_vram(&e) => Ok(None),
            Err(e) => Err(gpu_msm_err(Q)(e)),
        };
        let (mut w, adopted) = match on_device {
            // The conversion waits for the evaluation that read the limbs (`read`, after
            // the copy that wrote them) and nothing else: the buffer's stream may hold the
            // next proof's work by now.
            Some((limbs, read)) => {
                let w = copy
                    .adopt_scalars_montgomery_after(limbs, n_w, &read)
                    .map_err(gpu_msm_err(Q))?;
                (w, true)
            }
            None => match alloc(n_w)? {
                Some(w) => (w, false),
                None => return Ok(None),
            },
        };
        let mut a = None;
        if needs.a && n_a > 0 {
            let Some(d) = alloc(n_a)? else {
                return Ok(None);
            };
            a = Some(d);
        }
        let mut b = None;
        if needs.b && n_b > 0 {
            let Some(d) = alloc(n_b)? else {
                return Ok(None);
            };
            b = Some(d);
        }
        let alloc_time = t.elapsed();
        // The masks through a pinned buffer (one of `held`, else the pool's), copied
        // asynchronously on the copy stream: no pageable copy from this thread (it runs
        // beside the device's work), no host scratch besides the staging.
        let masks: [(Option<&DensityMask>, usize); 3] = [
            (
                a.as_ref().filter(|_| !needs.a_inputs_only).map(|_| x.a_aux),
                n_aux,
            ),
            (b.as_ref().map(|_| x.b_input), n_in),
            (b.as_ref().map(|_| x.b_aux), n_aux),
        ];
        let mut uploaded: [Option<gpu_msm::DeviceMask>; 3] = [None, None, None];
        let mask_words: usize = masks
            .iter()
            .filter_map(|(m, n)| m.map(|m| GpuMsm::mask_staging_words(m, *n)))
            .sum();
        if mask_words > 0 {
            let mut buf = self.staging_buffer("masks", mask_words, (held, from))?;
            let mut at = 0;
            for ((m, n), (out, q)) in masks
                .iter()
                .zip(uploaded.iter_mut().zip(["a_query", "b_query", "b_query"]))
            {
                if let Some(m) = m {
                    *out = Some(
                        copy.upload_mask_staged(m, *n, &mut buf, at)
                            .map_err(gpu_msm_err(q))?,
                    );
                    at += GpuMsm::mask_staging_words(m, *n);
                }
            }
            // Dropped here, back to the pool: the pool waits for its copies before it lends
            // it again.
        }
        let [a_mask, b_in_mask, b_aux_mask] = uploaded;
        let b_masks = b_in_mask.zip(b_aux_mask);
        let masks_time = t.elapsed() - alloc_time;
        // The raw limbs into pinned memory, then one copy (unless on the device already,
        // where `adopt_scalars_montgomery_after` queued the conversion).
        let mut waited = t.elapsed();
        if !adopted {
            let limbs = SCALAR_LIMBS * n_w;
            let mut staging = self.staging_buffer(Q, limbs, (held, from))?;
            let gpu_err = |e: GpuError| gpu_msm_err(Q)(GpuMsmError::Gpu(e));
            let host = staging.as_mut_slice().map_err(gpu_err)?;
            waited = t.elapsed();
            write_montgomery(host, &[x.aux, x.inputs]);
            staging
                .copy_to_device(0..limbs, w.words_mut(), 0, copy_stream)
                .map_err(gpu_err)?;
            drop(staging);
            copy.montgomery_to_canonical(&mut w)
                .map_err(gpu_msm_err(Q))?;
        }
        // a: the inputs, then the aux its mask selects (none: the inputs alone).
        if let Some(a) = a.as_mut() {
            let q = "a_query";
            let mut k = copy
                .select_scalars((&w, n_aux, n_in), None, a, 0)
                .map_err(gpu_msm_err(q))?;
            if let Some(mask) = &a_mask {
                k += copy
                    .select_scalars((&w, 0, mask.len()), Some(mask), a, k)
                    .map_err(gpu_msm_err(q))?;
            }
            check_selected(q, n_a, k)?;
        }
        // b: the inputs and the aux their masks select.
        if let (Some(b), Some((m_in, m_aux))) = (b.as_mut(), &b_masks) {
            let q = "b_query";
            let mut k = copy
                .select_scalars((&w, n_aux, m_in.len()), Some(m_in), b, 0)
                .map_err(gpu_msm_err(q))?;
            k += copy
                .select_scalars((&w, 0, m_aux.len()), Some(m_aux), b, k)
                .map_err(gpu_msm_err(q))?;
            check_selected(q, n_b, k)?;
        }
        // One event for each reader: the device thread's G1 MSMs and B on G2.
        let (g1_ready, g2_ready) = (record(copy_stream, Q)?, record(copy_stream, Q)?);
        w.truncate(n_aux);
        Ok(Some(DeviceWitness {
            l: needs.l.then_some(w),
            a,
            b: b.map(Arc::new),
            g1_ready,
            g2_ready,
            host_time: t.elapsed(),
            alloc_time,
            masks_time,
            waited,
        }))
    }
}

/// An event recorded on `stream` after the work queued so far (a staging's copy).
fn record(stream: &Arc<CudaStream>, query: &'static str) -> Result<CudaEvent, ProverError> {
    stream.record_event(None).map_err(|code| {
        gpu_msm_err(query)(GpuMsmError::Gpu(GpuError::Driver {
            call: "cuEventRecord",
            code,
        }))
    })
}

/// The selection wrote as many scalars as the query has bases (a mask with set bits past
/// its part is a malformed proof input, as on the host path).
fn check_selected(q: &'static str, expected: usize, written: usize) -> Result<(), ProverError> {
    if written == expected {
        Ok(())
    } else {
        Err(gpu_msm_err(q)(GpuMsmError::LengthMismatch {
            n_bases: expected,
            n_scalars: written,
        }))
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
    fn witness_limbs_are_the_parts_in_montgomery_form() {
        let mut g = SplitMix::new(seed());
        for (n_aux, n_in) in [(0usize, 1usize), (1, 1), (70, 3), (5000, 2)] {
            let aux = scalars(&mut g, n_aux);
            let inputs = scalars(&mut g, n_in);
            // A staging buffer is a size class: longer than the witness; the rest keeps
            // its poison.
            let len = gpu_device::size_class(SCALAR_LIMBS * (n_aux + n_in));
            let mut out = vec![u64::MAX; len];
            assert_eq!(write_montgomery(&mut out, &[&aux, &inputs]), n_aux + n_in);
            let reprs: &[FrRepr] = bytemuck::cast_slice(&out[..SCALAR_LIMBS * (n_aux + n_in)]);
            for (i, s) in aux.iter().chain(&inputs).enumerate() {
                assert_eq!(reprs[i], FrRepr::from_scalar(s), "scalar {i}");
                assert_eq!(reprs[i].to_scalar().unwrap(), *s, "scalar {i}");
            }
            assert!(out[SCALAR_LIMBS * (n_aux + n_in)..]
                .iter()
                .all(|&w| w == u64::MAX));
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
