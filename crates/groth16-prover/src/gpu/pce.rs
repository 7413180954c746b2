//! a, b and c evaluated on the device: a circuit's PCE kept in VRAM (uploaded once, kept
//! while the backend lives, charged to the device's VRAM budget), the witness copied to
//! the device once, the three sparse mat-vecs and the witness check `a·b = c` run there
//! (`pce.cu`). The host then computes only the witness, and a proof moves 32 bytes a
//! witness value to the device instead of 96 a domain point; the MSMs read the same copy
//! of the witness.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use bls12_381::Scalar;
use bls_repr::FrRepr;
use cudarc::driver::CudaEvent;
use gpu_device::{DeviceBuffer, Gpu, GpuError};
use gpu_ntt::{AbcSource, DeviceR1cs, GpuNttError, SparseParts};
use pce_cache::{Fingerprint, MatrixId, Pce};

use super::resident::{DeviceBytes, IdleEvictor, Resident, DEVICE_PCE_MIN_IDLE};
use super::staging::{write_montgomery, PinnedBuf, SCALAR_LIMBS};
use super::{driver_err, ntt_err, GpuBackend};
use crate::backend::{BackendOwned, HOutput};
use crate::ProverError;

/// Device PCEs a backend keeps (least recently used dropped first): a daemon serves a few
/// circuits (PoRep, the PoSts, SnapDeals); each is a few GiB at Filecoin's sizes.
const MAX_RESIDENT: usize = 3;

fn gpu_err(e: GpuError) -> ProverError {
    ntt_err(GpuNttError::Gpu(e))
}

/// A circuit's PCE in VRAM (gpu-ntt's `DeviceR1cs`), by fingerprint.
pub(super) struct DevicePce {
    fingerprint: Fingerprint,
    r1cs: DeviceR1cs,
    n_constraints: usize,
}

/// `pce`'s A, B and C as gpu-ntt's `DeviceR1cs` takes them (the same sections: gpu-ntt
/// does not depend on pce-cache).
pub fn sparse_parts(pce: &Pce) -> [SparseParts<'_>; 3] {
    MatrixId::ALL.map(|id| {
        let p = pce.matrix_parts(id);
        SparseParts {
            block_ptr: p.block_ptr,
            row_len: p.row_len,
            long_row: p.long_row,
            long_len: p.long_len,
            cols: p.cols,
            codes: p.codes,
            code_bytes: p.code_bytes,
        }
    })
}

impl DevicePce {
    /// Uploads `pce` (synchronously: its sections may be a mapped file's pages).
    fn upload(gpu: &Gpu, pce: &Pce) -> Result<DevicePce, GpuNttError> {
        let shape = pce.shape();
        let parts = sparse_parts(pce);
        let table: Vec<FrRepr> = pce.coefficients().iter().map(FrRepr::from_scalar).collect();
        let r1cs = DeviceR1cs::upload(
            gpu,
            parts,
            &table,
            (
                shape.n_rows as usize,
                shape.n_inputs as usize,
                shape.n_aux as usize,
            ),
        )?;
        Ok(DevicePce {
            fingerprint: pce.fingerprint(),
            r1cs,
            n_constraints: shape.n_constraints as usize,
        })
    }
}

impl DeviceBytes for DevicePce {
    fn device_bytes(&self) -> u64 {
        self.r1cs.bytes()
    }
}

/// The device PCEs a backend keeps (at most [`MAX_RESIDENT`], least recently used first):
/// LRU-evicted residents ([`super::resident`]).
pub(super) struct ResidentPces(Arc<Mutex<Resident<DevicePce>>>);

impl Default for ResidentPces {
    fn default() -> ResidentPces {
        ResidentPces(Arc::new(Mutex::new(Resident::new(MAX_RESIDENT))))
    }
}

impl ResidentPces {
    fn lock(&self) -> std::sync::MutexGuard<'_, Resident<DevicePce>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes of VRAM they hold.
    pub(super) fn bytes(&self) -> u64 {
        self.lock().bytes()
    }

    /// An evictor for the device's VRAM budget: it drops the PCEs no proof holds that have
    /// been idle for [`DEVICE_PCE_MIN_IDLE`] (another key's promotion to the device, say,
    /// can take their room).
    pub(super) fn evictor(&self) -> Arc<dyn memory_budget::Evictor> {
        Arc::new(IdleEvictor {
            list: Arc::downgrade(&self.0),
            min_idle: DEVICE_PCE_MIN_IDLE,
        })
    }

    /// Drops every PCE no proof holds, now; returns the device bytes freed.
    pub(super) fn drop_idle(&self) -> u64 {
        self.lock().drop_idle()
    }
}

/// A proof whose a, b and c the device evaluates: the witness's Montgomery limbs
/// (`aux ++ inputs`) in a pinned buffer of the pool, and the circuit's device PCE.
pub(super) struct WitnessOnly {
    pub(super) pce: Arc<DevicePce>,
    pub(super) staged: PinnedBuf,
    pub(super) n_w: usize,
    pub(super) m: usize,
    /// The witness copied to the device ahead of the H step (`prefetch`), with a, b and
    /// c's device buffers allocated there too (mapping 12 GiB takes a while at 2^27) and,
    /// unless the backend says otherwise, a, b and c evaluated there.
    pub(super) on_device: Option<Ahead>,
}

/// What `prefetch_witness_only` did on the prefetch stream, all of it done once `ready` is.
pub(super) struct Ahead {
    witness: DeviceBuffer<u64>,
    abc: [DeviceBuffer<u64>; 3],
    ready: CudaEvent,
    /// a, b and c evaluated (and their check queued), with timing events around it.
    evaluated: Option<(DeviceCheck, (CudaEvent, CudaEvent))>,
}

/// The witness check of a proof whose a, b and c the device evaluated: queued with the
/// evaluation, read once the proof's device work is done (no wait in the middle of it).
pub(super) struct DeviceCheck {
    pending: gpu_ntt::PendingCheck,
    n_constraints: usize,
    n_rows: usize,
}

impl DeviceCheck {
    /// Waits for `gpu`'s stream (the evaluation's) and turns what the check found into
    /// the prover's errors: an unsatisfied row (unless a timing-only run lets it
    /// through), or a damaged PCE.
    pub(super) fn verify(self, gpu: &Gpu) -> Result<(), ProverError> {
        let found = self.pending.wait(gpu).map_err(ntt_err)?;
        if found.damaged {
            return Err(ProverError::BackendUnavailable {
                backend: "gpu",
                reason: "the device found a row length, column or code out of range in the PCE",
            });
        }
        match found
            .first_unsatisfied
            .filter(|_| !crate::timing_only::let_unsatisfied_through())
        {
            Some(row) => Err(ProverError::Unsatisfied {
                row,
                n_constraints: self.n_constraints,
                n_rows: self.n_rows,
            }),
            None => Ok(()),
        }
    }
}

impl BackendOwned for WitnessOnly {
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

impl GpuBackend {
    /// The device PCE of `pce`'s circuit, uploaded on first use. `Ok(None)` when the VRAM
    /// budget has no room for it (after dropping the other idle device PCEs): the host
    /// evaluates a, b and c then.
    pub(super) fn device_pce(&self, pce: &Pce) -> Result<Option<Arc<DevicePce>>, ProverError> {
        let fp = pce.fingerprint();
        let mut list = self.pces.lock();
        if let Some(p) = list.take(|p| p.fingerprint == fp, Instant::now()) {
            return Ok(Some(p));
        }
        for attempt in 0..2 {
            let t = Instant::now();
            match DevicePce::upload(&self.gpu, pce) {
                Ok(p) => {
                    metrics::histogram!("pinion_groth16_prover_pce_upload_seconds")
                        .record(t.elapsed().as_secs_f64());
                    let p = Arc::new(p);
                    list.push(p.clone(), Instant::now());
                    return Ok(Some(p));
                }
                // Room from the others no proof holds (one a proof holds stays listed,
                // so the next proof of its circuit finds it instead of uploading another).
                Err(GpuNttError::Gpu(e))
                    if e.is_vram_refusal() && attempt == 0 && list.drop_idle() > 0 => {}
                Err(GpuNttError::Gpu(e)) if e.is_vram_refusal() => return Ok(None),
                Err(e) => return Err(ntt_err(e)),
            }
        }
        Ok(None)
    }

    /// For a proof over a domain of `m` points of `pce`'s circuit: its witness written
    /// into a pinned buffer of the pool (paid from `from`), for the device to evaluate a,
    /// b and c from. `Ok(None)` when the device does not take it (the backend's switch is
    /// off, no size class of `m`, no VRAM for the PCE).
    pub(super) fn witness_only(
        &self,
        pce: &Pce,
        m: usize,
        (inputs, aux): (&[Scalar], &[Scalar]),
        from: &mut memory_budget::Reservation,
    ) -> Result<Option<WitnessOnly>, ProverError> {
        if !self.evaluates_on_device(m) {
            return Ok(None);
        }
        let Some(device) = self.device_pce(pce)? else {
            return Ok(None);
        };
        let n_w = inputs.len() + aux.len();
        let mut staged = self.pool.acquire_from(SCALAR_LIMBS * n_w, from).map_err(
            super::staging::staging_err("witness (a, b, c on the device)"),
        )?;
        let host = staged.as_mut_slice().map_err(gpu_err)?;
        write_montgomery(host, &[aux, inputs]);
        Ok(Some(WitnessOnly {
            pce: device,
            staged,
            n_w,
            m,
            on_device: None,
        }))
    }

    /// Whether proofs over a domain of `m` points have a, b and c evaluated on the device.
    pub(super) fn evaluates_on_device(&self, m: usize) -> bool {
        self.device_abc && super::staging::stages(m)
    }

    /// Copies the staged witness to the device on the prefetch stream, allocates a, b and
    /// c's device buffers there and (by default, `with_abc_ahead`) evaluates them there
    /// too, so that the H step starts with the transforms while the device's own stream
    /// still runs another proof's MSMs (see `ProverBackend::prefetch_abc`). `Ok(false)`
    /// without room on the device now (what was allocated is freed).
    pub(super) fn prefetch_witness_only(&self, w: &mut WitnessOnly) -> Result<bool, ProverError> {
        if w.on_device.is_some() {
            return Ok(true);
        }
        let words = SCALAR_LIMBS * w.n_w;
        // The witness, a, b, c and h.
        if !self.room_to_prefetch((8 * words + 4 * 32 * w.m) as u64, w.m) {
            return Ok(false);
        }
        let stream = self.prefetch_stream()?;
        let on = self.gpu.with_stream(stream.clone());
        let Some((mut witness, mut abc)) =
            alloc_inputs(&on, words, SCALAR_LIMBS * w.m, "(prefetched)")?
        else {
            return Ok(false);
        };
        w.staged
            .copy_to_device(0..words, &mut witness, 0, &stream)
            .map_err(gpu_err)?;
        let evaluated = if self.abc_ahead {
            Some(self.queue_abc(&on, &w.pce, &witness, &mut abc, w.m)?)
        } else {
            None
        };
        let ready = stream
            .record_event(None)
            .map_err(|c| driver_err("cuEventRecord", c))?;
        w.on_device = Some(Ahead {
            witness,
            abc,
            ready,
            evaluated,
        });
        Ok(true)
    }

    /// a, b and c evaluated from `witness` into `abc` on `on`'s stream, with the witness
    /// check queued after them, and timing events around both.
    fn queue_abc(
        &self,
        on: &Gpu,
        pce: &DevicePce,
        witness: &DeviceBuffer<u64>,
        abc: &mut [DeviceBuffer<u64>; 3],
        m: usize,
    ) -> Result<(DeviceCheck, (CudaEvent, CudaEvent)), ProverError> {
        let stream = on.stream();
        let from = self.gpu.timing_event().map_err(gpu_err)?;
        from.record(stream)
            .map_err(|c| driver_err("cuEventRecord", c))?;
        let [a, b, c] = abc;
        let pending = pce
            .r1cs
            .queue_evaluate_with(self.abc_kernel, on, witness, [a, b, c], m)
            .map_err(ntt_err)?;
        let to = self.gpu.timing_event().map_err(gpu_err)?;
        to.record(stream)
            .map_err(|c| driver_err("cuEventRecord", c))?;
        let check = DeviceCheck {
            pending,
            n_constraints: pce.n_constraints,
            n_rows: pce.r1cs.n_rows(),
        };
        Ok((check, (from, to)))
    }

    /// The H step of a proof whose a, b and c the device evaluates: the witness to the
    /// device and the three mat-vecs with the witness check queued after them (unless
    /// done ahead, `prefetch_witness_only`), then the transforms as for staged a, b, c.
    /// Nothing is waited for: h keeps the check (read once the proof's device work is
    /// done: an unsatisfied row is [`ProverError::Unsatisfied`], a damaged PCE an error),
    /// the witness on the device for the MSMs, and the pinned buffer for their staging.
    pub(super) fn h_from_witness(&self, mut w: WitnessOnly) -> Result<HOutput, ProverError> {
        let t = Instant::now();
        let stream = self.gpu.stream().clone();
        let started = self.gpu.timing_event().map_err(gpu_err)?;
        started
            .record(&stream)
            .map_err(|c| driver_err("cuEventRecord", c))?;
        let words = SCALAR_LIMBS * w.n_w;
        let ahead = match w.on_device.take() {
            Some(ahead) => {
                stream
                    .wait(&ahead.ready)
                    .map_err(|c| driver_err("cuStreamWaitEvent", c))?;
                ahead
            }
            None => {
                // Allocated on this stream, the one that copies into them and runs the
                // mat-vecs and transforms: `cuMemAllocAsync` memory may be touched on
                // another stream only after an event orders it behind the allocation, and
                // cudarc records none for `alloc` (its events are first recorded by a use).
                // On the prefetch stream the pool could hand back memory freed there (or,
                // through a cross-stream dependency, elsewhere) behind work still queued,
                // which the copy below would not wait for.
                let alloc = || {
                    alloc_inputs(
                        &self.gpu,
                        words,
                        SCALAR_LIMBS * w.m,
                        "(a, b, c on the device)",
                    )
                };
                // Without room: the other circuits' PCEs no proof holds give theirs, once.
                let inputs = match alloc()? {
                    None if self.pces.drop_idle() > 0 => alloc()?,
                    got => got,
                };
                let Some((mut witness, abc)) = inputs else {
                    return Err(ProverError::BackendUnavailable {
                        backend: "gpu",
                        reason: "no device memory for the witness and a, b, c",
                    });
                };
                w.staged
                    .copy_to_device(0..words, &mut witness, 0, &stream)
                    .map_err(gpu_err)?;
                let ready = stream
                    .record_event(None)
                    .map_err(|c| driver_err("cuEventRecord", c))?;
                Ahead {
                    witness,
                    abc,
                    ready,
                    evaluated: None,
                }
            }
        };
        let Ahead {
            witness,
            mut abc,
            evaluated,
            ..
        } = ahead;
        // Not copied ahead or not evaluated there: queued here, not waited for (the
        // transforms follow on this stream; the check is read once the proof's device
        // work is done).
        let (check, abc_events) = match evaluated {
            Some(done) => done,
            None => self.queue_abc(&self.gpu, &w.pce, &witness, &mut abc, w.m)?,
        };
        // The MSMs convert the witness in place on another stream: after the mat-vecs that
        // read it (here or ahead: this stream waited for those).
        let read = stream
            .record_event(None)
            .map_err(|c| driver_err("cuEventRecord", c))?;
        let [a, b, c] = abc;
        let h = self
            .ntt
            .h_poly_device(AbcSource::Device { a, b, c }, &stream)
            .map_err(ntt_err)?;
        let kept = super::h_step::Kept {
            abc: None,
            witness: Some((witness, read)),
            held: vec![w.staged],
            check: Some(check),
            abc_events: Some(abc_events),
        };
        let mut out = self.h_output(h, started, kept)?;
        out.transfers = t.elapsed();
        Ok(out)
    }
}

/// Device buffers for a witness of `witness_words` u64 words and for a, b and c of
/// `abc_words` each, on `gpu`'s stream; `Ok(None)` when the VRAM budget or the device
/// refuses one (those allocated are freed).
#[allow(clippy::type_complexity)]
fn alloc_inputs(
    gpu: &Gpu,
    witness_words: usize,
    abc_words: usize,
    why: &str,
) -> Result<Option<(DeviceBuffer<u64>, [DeviceBuffer<u64>; 3])>, ProverError> {
    let Some(w) = alloc_or_none(gpu, witness_words, &format!("witness {why}"))? else {
        return Ok(None);
    };
    Ok(alloc_abc(gpu, abc_words, why)?.map(|abc| (w, abc)))
}

/// Device buffers for a, b and c of `words` u64 words each, on `gpu`'s stream; `Ok(None)`
/// when the VRAM budget or the device refuses one (those allocated are freed).
pub(super) fn alloc_abc(
    gpu: &Gpu,
    words: usize,
    why: &str,
) -> Result<Option<[DeviceBuffer<u64>; 3]>, ProverError> {
    let mut abc = Vec::with_capacity(3);
    for what in ["h a", "h b", "h c"] {
        let Some(d) = alloc_or_none(gpu, words, &format!("{what} {why}"))? else {
            return Ok(None);
        };
        abc.push(d);
    }
    let Ok(abc) = <[DeviceBuffer<u64>; 3]>::try_from(abc) else {
        unreachable!("three buffers were pushed");
    };
    Ok(Some(abc))
}

/// A device buffer of `words` u64 words whose contents a copy or kernel fills, or
/// `Ok(None)` when the VRAM budget or the device refuses it.
fn alloc_or_none(
    gpu: &Gpu,
    words: usize,
    label: &str,
) -> Result<Option<DeviceBuffer<u64>>, ProverError> {
    match gpu.alloc_for_overwrite::<u64>(words, label) {
        Ok(d) => Ok(Some(d)),
        Err(e) if e.is_vram_refusal() => Ok(None),
        Err(e) => Err(gpu_err(e)),
    }
}
