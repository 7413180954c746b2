//! The GPU backend's H step: a, b and c copied to the device (from the pool's pinned
//! buffers, or from host vectors for a caller of the trait with unpadded vectors), the
//! six NTTs on the device, and h left there for the H MSM to adopt in place.

use std::time::Instant;

use bls12_381::Scalar;
use bls_repr::FrRepr;
use cudarc::driver::CudaEvent;
use gpu_device::{DeviceBuffer, Gpu, GpuError};
use gpu_ntt::{AbcEvaluations, AbcSource, GpuNttError};
use rayon::prelude::*;

use super::staging::{reprs_into, PinnedAbc};
use super::{driver_err, ntt_err, GpuBackend};
use crate::backend::{BackendCoeffs, BackendH, BackendOwned, HOutput, HPoly};
use crate::ProverError;

/// h on the device, as the GPU backend's H step leaves it: `m` elements of which the
/// first `n_coeffs` are the H MSM's scalars (m − 1 coefficients of h, or m coset values
/// for a zkey; Montgomery form), possibly still being computed on
/// the device's stream. Read by the backend's MSMs in place (no copy); copied back for
/// any other reader ([`BackendCoeffs::into_host`]).
pub(super) struct DeviceH {
    pub(super) coeffs: DeviceBuffer<u64>,
    pub(super) n_coeffs: usize,
    pub(super) gpu: Gpu,
    /// Recorded on the device's stream before and after the transforms.
    pub(super) started: CudaEvent,
    pub(super) finished: CudaEvent,
    /// What the proof's MSMs take from h besides the coefficients.
    pub(super) kept: Kept,
}

/// What h keeps for the proof's MSMs besides the coefficients (see [`DeviceH`]; taken out
/// by `staging::take_held_abc`).
pub(super) struct Kept {
    /// The pinned a, b, c buffers the transforms read, kept for the proof's MSM staging
    /// (see `GpuBackend::msms_from`): handed back to the pool they could be taken by
    /// another proof in between, and this one would then need new ones.
    pub(super) abc: Option<PinnedAbc>,
    /// The witness on the device (Montgomery, `aux ++ inputs`) when the device evaluated
    /// a, b and c from it, with an event after that evaluation: the MSMs' scalars are made
    /// from it in place.
    pub(super) witness: Option<(DeviceBuffer<u64>, CudaEvent)>,
    /// Other pinned buffers of the proof kept for the MSMs' staging (the witness's).
    pub(super) held: Vec<super::staging::PinnedBuf>,
    /// The witness check queued with a, b and c's evaluation on the device, read once the
    /// device work is done (by the MSMs, or by `into_host`).
    pub(super) check: Option<super::pce::DeviceCheck>,
    /// Timing events around a, b and c's evaluation on the device, when it ran (on the
    /// device's stream, or ahead on the prefetch stream).
    pub(super) abc_events: Option<(CudaEvent, CudaEvent)>,
}

impl Kept {
    /// Nothing kept.
    pub(super) fn none() -> Kept {
        Kept {
            abc: None,
            witness: None,
            held: Vec::new(),
            check: None,
            abc_events: None,
        }
    }
}

impl BackendOwned for DeviceH {
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

impl BackendCoeffs for DeviceH {
    fn into_host(mut self: Box<Self>) -> Result<Vec<Scalar>, ProverError> {
        if let Some(check) = self.kept.check.take() {
            check.verify(&self.gpu)?;
        }
        let reprs = gpu_ntt::download_reprs(&self.gpu, &self.coeffs).map_err(ntt_err)?;
        gpu_ntt::reprs_to_scalars(&reprs[..self.n_coeffs]).map_err(ntt_err)
    }
}

fn to_reprs(v: Vec<Scalar>) -> Vec<FrRepr> {
    v.par_iter().map(FrRepr::from_scalar).collect()
}

impl GpuBackend {
    /// H from host vectors: converted straight into the pool's pinned buffers when they
    /// are the prover's padded layout (each vector dropped once converted, then
    /// `inputs_released`), else pageable copies, synchronous for the host.
    pub(super) fn h_from_host(
        &self,
        abc: AbcEvaluations,
        inputs_released: &mut dyn FnMut(),
    ) -> Result<HOutput, ProverError> {
        let AbcEvaluations { a, b, c } = abc;
        let t = Instant::now();
        let m = a.len();
        if b.len() == m && c.len() == m {
            if let Some(mut bufs) = self.pinned_abc(m, None)? {
                {
                    use crate::backend::AbcStorage;
                    for (dst, v) in bufs.slices_mut()?.into_iter().zip([a, b, c]) {
                        reprs_into(dst, &v);
                    }
                }
                inputs_released();
                let mut out = self.h_from_pinned(bufs)?;
                out.transfers = t.elapsed();
                return Ok(out);
            }
        }
        self.h_pageable(AbcEvaluations { a, b, c }, None, inputs_released, t)
    }

    /// snarkjs's H step (a zkey's) from host vectors: a·b − c on the coset of `shift`,
    /// m values left on the device; pageable copies, synchronous for the host.
    pub(super) fn h_coset_from_host(
        &self,
        abc: AbcEvaluations,
        shift: Scalar,
        inputs_released: &mut dyn FnMut(),
    ) -> Result<HOutput, ProverError> {
        self.h_pageable(abc, Some(shift), inputs_released, Instant::now())
    }

    /// The H step from pageable host vectors: bellman's (`coset_shift` `None`) or
    /// snarkjs's on the coset of the given shift.
    fn h_pageable(
        &self,
        abc: AbcEvaluations,
        coset_shift: Option<Scalar>,
        inputs_released: &mut dyn FnMut(),
        t: Instant,
    ) -> Result<HOutput, ProverError> {
        let AbcEvaluations { a, b, c } = abc;
        let gpu_err = |e: GpuError| ntt_err(GpuNttError::Gpu(e));
        let stream = self.gpu.stream().clone();
        let started = self.gpu.timing_event().map_err(gpu_err)?;
        let (a, b, c) = (to_reprs(a), to_reprs(b), to_reprs(c));
        started
            .record(&stream)
            .map_err(|c| driver_err("cuEventRecord", c))?;
        let src = AbcSource::Host {
            a: &a,
            b: &b,
            c: &c,
        };
        let h = match coset_shift {
            None => self.ntt.h_poly_device(src, &stream),
            Some(shift) => self.ntt.h_coset_evaluations_device(src, shift, &stream),
        }
        .map_err(ntt_err)?;
        h.inputs_uploaded
            .synchronize()
            .map_err(|c| driver_err("cuEventSynchronize", c))?;
        drop((a, b, c));
        inputs_released();
        let mut out = self.h_output(h, started, Kept::none())?;
        out.transfers = t.elapsed();
        Ok(out)
    }

    /// Queues the H step from a, b, c in the pool's pinned buffers (asynchronous copies);
    /// h keeps the buffers for the proof's MSM staging.
    pub(super) fn h_from_pinned(&self, mut abc: PinnedAbc) -> Result<HOutput, ProverError> {
        let gpu_err = |e: GpuError| ntt_err(GpuNttError::Gpu(e));
        let stream = self.gpu.stream().clone();
        let started = self.gpu.timing_event().map_err(gpu_err)?;
        started
            .record(&stream)
            .map_err(|c| driver_err("cuEventRecord", c))?;
        let source = match abc.on_device.take() {
            // Copied ahead (`prefetch_abc`): the transforms wait for those copies only.
            Some(([a, b, c], copied)) => {
                stream
                    .wait(&copied)
                    .map_err(|c| driver_err("cuStreamWaitEvent", c))?;
                AbcSource::Device { a, b, c }
            }
            None => {
                let [a, b, c] = &abc.bufs;
                AbcSource::Pinned {
                    a: a.pinned(),
                    b: b.pinned(),
                    c: c.pinned(),
                }
            }
        };
        let h = self.ntt.h_poly_device(source, &stream).map_err(ntt_err)?;
        // Kept for the MSMs' staging while the copies may still run: gpu-ntt copies
        // through cudarc's `host_slice()`, whose event host access waits for.
        self.h_output(
            h,
            started,
            Kept {
                abc: Some(abc),
                ..Kept::none()
            },
        )
    }

    /// h left on the device, with the events around its transforms.
    pub(super) fn h_output(
        &self,
        h: gpu_ntt::HPolyDevice,
        started: CudaEvent,
        kept: Kept,
    ) -> Result<HOutput, ProverError> {
        let finished = self
            .gpu
            .timing_event()
            .map_err(|e| ntt_err(GpuNttError::Gpu(e)))?;
        finished
            .record(self.gpu.stream())
            .map_err(|c| driver_err("cuEventRecord", c))?;
        let n_coeffs = h.n_coeffs;
        Ok(HOutput {
            h: HPoly::Backend(BackendH::new(
                n_coeffs,
                DeviceH {
                    coeffs: h.coeffs,
                    n_coeffs,
                    gpu: self.gpu.clone(),
                    started,
                    finished,
                    kept,
                },
            )),
            transfers: std::time::Duration::ZERO,
        })
    }
}
