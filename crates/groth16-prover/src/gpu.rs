//! The CUDA backend: H on the GPU (`gpu_ntt::GpuNtt`), the four G1 MSMs on the GPU
//! (`gpu_msm::GpuMsm`) over bases kept resident per proving key, and the G2 MSM on the
//! host (`gpu_msm::CpuMsm`, there are no G2 kernels) on its own thread while the GPU works.
//!
//! # Resident bases
//! The first proof over a [`ProvingKey`] uploads the prefixes of `h_query`, `l_query`,
//! `a_query` and `b_g1_query` that the circuit uses (one device buffer each, charged to the
//! device's VRAM budget by `gpu-device`); later proofs over the same key reuse them. One key
//! is resident at a time: a proof over another key (told apart by [`ProvingKey::id`]) drops
//! the old buffers first. A query whose upload the VRAM budget or the driver refuses (too
//! big for the card) is computed **on the CPU** for as long as that key is resident; the
//! next key tries again. The host copy made for an upload (96 bytes per base, bls-repr
//! layout) is charged to the host budget (`Category::Transient`) while it lives.
//!
//! # One resident MSM per query
//! A resident MSM needs as many scalars as bases, so the A and B sums are formed as one MSM
//! each: A over `a_query[..n_in + |a_aux|]` with the scalars `inputs ++ aux[a_aux]`, B over
//! `b_g1_query[..|b_in| + |b_aux|]` with `inputs[b_in] ++ aux[b_aux]`. That is exactly
//! groth16's two sums added (exact group arithmetic), so proofs do not change.
//!
//! # Host memory
//! H: a, b and c are converted to bls-repr's Montgomery layout one vector at a time (each
//! `Vec<Scalar>` is dropped once converted: one extra vector of `32·m` bytes at most) and
//! copied synchronously, so the caller's a/b/c charge can be released when the call's
//! upload is done; h comes back as `32·m` bytes of reprs and `32·m` of scalars. MSMs:
//! inputs and aux are converted to canonical words once per proof (32 bytes per scalar,
//! kept until the G1 MSMs end) and the l MSM uploads aux's words as they are; the a and
//! b_g1 MSMs gather their selected words into one more vector (32 bytes per term); h's
//! words (32 per coefficient) live only for the h MSM, before aux is converted. At most
//! `64·(n_inputs + n_aux)` bytes at once (the per-MSM selection it replaces held as much),
//! plus the CPU G2 MSM's scratch. Not yet: a pinned staging pool (copies are from pageable
//! memory).
use std::borrow::Cow;
use std::cell::OnceCell;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bls12_381::{G1Affine, G1Projective, G2Projective, Scalar};
use bls_repr::FrRepr;
use gpu_device::{Gpu, GpuError};
use gpu_msm::{CpuMsm, DensityMask, DeviceBasesG1, GpuMsm, GpuMsmError, MsmBackend, MsmError};
use gpu_ntt::{AbcEvaluations, AbcSource, GpuNtt, GpuNttError, NttError};
use memory_budget::{Budget, Category};
use rayon::prelude::*;

use crate::backend::{
    cpu_msm_scratch_bytes, msm_err, slice, BackendKind, HOutput, MsmInputs, MsmOutputs, MsmTimings,
    ProverBackend,
};
use crate::{ProverError, ProvingKey};

/// Bytes of one base in bls-repr's layout (the upload's host copy).
const G1_REPR_BYTES: u64 = 96;

/// Host bytes per MSM term while its scalars are prepared: the selected `Scalar` and its
/// 8 canonical u32 words.
const GPU_TERM_BYTES: u64 = 64;

/// Scalars of one part of an MSM, filtered by the mask when there is one.
type Part<'a> = (&'a [Scalar], Option<&'a DensityMask>);

/// The four G1 queries the GPU computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Query {
    H = 0,
    L = 1,
    A = 2,
    BG1 = 3,
}

impl Query {
    fn name(self) -> &'static str {
        match self {
            Query::H => "h_query",
            Query::L => "l_query",
            Query::A => "a_query",
            Query::BG1 => "b_g1_query",
        }
    }

    fn bases(self, key: &ProvingKey) -> &[G1Affine] {
        match self {
            Query::H => key.h_query(),
            Query::L => key.l_query(),
            Query::A => key.a_query(),
            Query::BG1 => key.b_g1_query(),
        }
    }
}

/// Where one query's MSM runs for the resident key.
#[derive(Clone, Debug)]
enum Placement {
    /// The first `len()` bases are on the device.
    Device(Arc<DeviceBasesG1>),
    /// The upload of `n` bases was refused (VRAM): computed on the CPU.
    Cpu { n: usize },
}

impl Placement {
    fn n(&self) -> usize {
        match self {
            Placement::Device(b) => b.len(),
            Placement::Cpu { n } => *n,
        }
    }
}

#[derive(Default)]
struct Resident {
    key_id: Option<u64>,
    queries: [Option<Placement>; 4],
}

/// The CUDA prover backend on one device. `Send + Sync`; proofs through one backend may
/// run concurrently (the device serialises their work on its stream).
pub struct GpuBackend {
    gpu: Gpu,
    ntt: GpuNtt,
    msm: GpuMsm,
    cpu: CpuMsm,
    budget: Budget,
    resident: Mutex<Resident>,
    /// Most bytes of bases kept resident (beyond them, queries run on the CPU).
    resident_limit_bytes: u64,
}

impl std::fmt::Debug for GpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuBackend")
            .field("gpu", &self.gpu)
            .field("resident_bases", &self.resident_bases())
            .finish_non_exhaustive()
    }
}

fn lock(m: &Mutex<Resident>) -> MutexGuard<'_, Resident> {
    // Placements are replaced whole, so a poisoned slot is still consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn ntt_err(e: GpuNttError) -> ProverError {
    ProverError::Ntt(NttError::from(e))
}

fn gpu_msm_err(query: &'static str) -> impl FnOnce(GpuMsmError) -> ProverError {
    move |e| ProverError::Msm {
        query,
        source: MsmError::from(e),
    }
}

/// Whether an upload failed for lack of device memory (then the CPU takes the query).
fn out_of_vram(e: &GpuMsmError) -> bool {
    matches!(
        e,
        GpuMsmError::Gpu(GpuError::Budget { .. } | GpuError::OutOfMemory { .. })
    )
}

/// u32 words of one scalar on the device (canonical, little-endian).
const SCALAR_WORDS: usize = 8;

/// Scalars per task when [`select_words_into`] filters in parallel (64 mask words).
const SELECT_BLOCK: usize = 4096;

/// Appends to `out` the words (8 per scalar, as [`gpu_msm::scalars_to_words`] makes them)
/// of the scalars whose bit is set in `mask`, in order, filtered in parallel. Scalar `i`
/// is kept when `mask.get(i)`; scalars past the mask's end are dropped and bits past the
/// scalars ignored, as the per-element filter did. Writes in place (no temporary), so a
/// caller that reserved the capacity holds no more than the result.
fn select_words_into(out: &mut Vec<u32>, words: &[u32], mask: &DensityMask) {
    let n = (words.len() / SCALAR_WORDS).min(mask.len());
    let mask_words = &mask.words()[..n.div_ceil(64)];
    // Mask word `k` restricted to the first `n` scalars.
    let bits = |k: usize| -> u64 {
        let valid = n - 64 * k;
        if valid >= 64 {
            mask_words[k]
        } else {
            mask_words[k] & ((1u64 << valid) - 1)
        }
    };
    let words_per_block = SELECT_BLOCK / 64;
    let n_blocks = mask_words.len().div_ceil(words_per_block);
    let block_words =
        |b: usize| b * words_per_block..((b + 1) * words_per_block).min(mask_words.len());
    let counts: Vec<usize> = (0..n_blocks)
        .into_par_iter()
        .map(|b| block_words(b).map(|k| bits(k).count_ones() as usize).sum())
        .collect();
    let total: usize = counts.iter().sum();
    let start = out.len();
    out.resize(start + total * SCALAR_WORDS, 0);
    // Each block writes its own slice of the new tail, sized by its count.
    let mut outs = Vec::with_capacity(n_blocks);
    let mut rest = &mut out[start..];
    for &count in &counts {
        let (head, tail) = rest.split_at_mut(count * SCALAR_WORDS);
        outs.push(head);
        rest = tail;
    }
    outs.into_par_iter().enumerate().for_each(|(b, dst)| {
        let mut pos = 0;
        for k in block_words(b) {
            let mut w = bits(k);
            while w != 0 {
                let i = 64 * k + w.trailing_zeros() as usize;
                dst[pos..pos + SCALAR_WORDS]
                    .copy_from_slice(&words[i * SCALAR_WORDS..(i + 1) * SCALAR_WORDS]);
                pos += SCALAR_WORDS;
                w &= w - 1;
            }
        }
    });
}

/// The canonical words of a proof's inputs and aux, converted at most once per proof
/// (on first use) and shared by the l, a and b_g1 MSMs.
struct ProofWords<'a> {
    inputs: &'a [Scalar],
    aux: &'a [Scalar],
    input_words: OnceCell<Vec<u32>>,
    aux_words: OnceCell<Vec<u32>>,
}

impl<'a> ProofWords<'a> {
    fn new(x: &MsmInputs<'a>) -> ProofWords<'a> {
        ProofWords {
            inputs: x.inputs,
            aux: x.aux,
            input_words: OnceCell::new(),
            aux_words: OnceCell::new(),
        }
    }

    fn inputs(&self) -> &[u32] {
        self.input_words
            .get_or_init(|| gpu_msm::scalars_to_words(self.inputs))
    }

    fn aux(&self) -> &[u32] {
        self.aux_words
            .get_or_init(|| gpu_msm::scalars_to_words(self.aux))
    }
}

/// The device scalars of query `q`'s MSM as canonical words: h, aux (l), `inputs ++
/// aux[a_aux]` (a), `inputs[b_input] ++ aux[b_aux]` (b_g1).
fn query_words<'w>(q: Query, x: &MsmInputs<'_>, w: &'w ProofWords<'_>) -> Cow<'w, [u32]> {
    match q {
        Query::H => Cow::Owned(gpu_msm::scalars_to_words(x.h)),
        Query::L => Cow::Borrowed(w.aux()),
        Query::A => {
            let (inputs, aux) = (w.inputs(), w.aux());
            let mut v = Vec::with_capacity(inputs.len() + SCALAR_WORDS * x.a_aux.count_ones());
            v.extend_from_slice(inputs);
            select_words_into(&mut v, aux, x.a_aux);
            Cow::Owned(v)
        }
        Query::BG1 => {
            let (inputs, aux) = (w.inputs(), w.aux());
            let n_terms = x.b_input.count_ones() + x.b_aux.count_ones();
            let mut v = Vec::with_capacity(SCALAR_WORDS * n_terms);
            select_words_into(&mut v, inputs, x.b_input);
            select_words_into(&mut v, aux, x.b_aux);
            Cow::Owned(v)
        }
    }
}

impl GpuBackend {
    /// The backend on device 0; host-side temporaries are charged to `budget`. A missing
    /// driver or device is [`ProverError::GpuUnavailable`], never a panic.
    pub fn new(budget: Budget) -> Result<GpuBackend, ProverError> {
        let gpu = Gpu::open(0).map_err(|source| ProverError::GpuUnavailable { source })?;
        Ok(GpuBackend::with_gpu(gpu, budget))
    }

    /// The backend on an opened device.
    pub fn with_gpu(gpu: Gpu, budget: Budget) -> GpuBackend {
        GpuBackend {
            ntt: GpuNtt::new(gpu.clone()),
            msm: GpuMsm::new(gpu.clone()),
            cpu: CpuMsm::new(),
            gpu,
            budget,
            resident: Mutex::new(Resident::default()),
            resident_limit_bytes: u64::MAX,
        }
    }

    /// Keeps at most `bytes` of bases resident (96 per base); a query that would go past
    /// it runs on the CPU, as when the VRAM budget refuses it. Leaves room on the card for
    /// other work; also how the tests reach the CPU fallback.
    pub fn with_resident_limit(mut self, bytes: u64) -> GpuBackend {
        self.resident_limit_bytes = bytes;
        self
    }

    /// The device.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Bases resident on the device now, per query: (query, bases on the device, bases the
    /// CPU computes because their upload was refused).
    pub fn resident_bases(&self) -> Vec<(&'static str, usize, usize)> {
        let r = lock(&self.resident);
        [Query::H, Query::L, Query::A, Query::BG1]
            .into_iter()
            .filter_map(|q| {
                r.queries[q as usize].as_ref().map(|p| match p {
                    Placement::Device(b) => (q.name(), b.len(), 0),
                    Placement::Cpu { n } => (q.name(), 0, *n),
                })
            })
            .collect()
    }

    /// Drops the resident bases (their VRAM returns to the budget).
    pub fn clear_resident(&self) {
        *lock(&self.resident) = Resident::default();
    }

    /// Where query `q`'s first `n` bases of `key` live, uploading them on first use.
    /// Returns the placement and the time spent uploading (zero when already resident).
    fn placement(
        &self,
        key: &ProvingKey,
        q: Query,
        n: usize,
    ) -> Result<(Placement, Duration), ProverError> {
        let mut r = lock(&self.resident);
        if r.key_id != Some(key.id()) {
            // Another key: free the old bases before uploading new ones.
            *r = Resident {
                key_id: Some(key.id()),
                ..Resident::default()
            };
        }
        if let Some(p) = &r.queries[q as usize] {
            if p.n() == n {
                return Ok((p.clone(), Duration::ZERO));
            }
        }
        r.queries[q as usize] = None;
        let bases = slice(q.name(), q.bases(key), 0, n)?;
        let host_bytes = G1_REPR_BYTES * n as u64;
        let resident_bytes: u64 = r
            .queries
            .iter()
            .flatten()
            .map(|p| match p {
                Placement::Device(b) => G1_REPR_BYTES * b.len() as u64,
                Placement::Cpu { .. } => 0,
            })
            .sum();
        if resident_bytes.saturating_add(host_bytes) > self.resident_limit_bytes {
            let p = Placement::Cpu { n };
            r.queries[q as usize] = Some(p.clone());
            return Ok((p, Duration::ZERO));
        }
        let t = Instant::now();
        let _host_copy = self
            .budget
            .try_reserve(
                host_bytes,
                Category::Transient,
                "groth16-prover base upload",
            )
            .map_err(|source| ProverError::Budget {
                what: "host copy of bases for upload",
                requested_bytes: host_bytes,
                source,
            })?;
        let p = match self.msm.upload_bases_g1(bases) {
            Ok(b) => Placement::Device(Arc::new(b)),
            Err(e) if out_of_vram(&e) => {
                metrics::counter!("pinion_groth16_prover_gpu_query_on_cpu_total").increment(1);
                Placement::Cpu { n }
            }
            Err(e) => return Err(gpu_msm_err(q.name())(e)),
        };
        let elapsed = t.elapsed();
        r.queries[q as usize] = Some(p.clone());
        Ok((p, elapsed))
    }

    /// One query's MSM: `Σ scalars·bases[..n]` where the scalars are `parts`
    /// concatenated (each filtered by its mask). On the device when the bases are
    /// resident (scalars from `words`, the same values as canonical words), else on the
    /// CPU. Returns the sum, the upload time of bases (first use) and the time spent
    /// converting and copying scalars.
    fn msm_query<'w>(
        &self,
        key: &ProvingKey,
        q: Query,
        n: usize,
        parts: &[Part<'_>],
        words: impl FnOnce() -> Cow<'w, [u32]>,
    ) -> Result<(G1Projective, Duration, Duration), ProverError> {
        if n == 0 {
            // No base is used (e.g. a circuit without aux in B): nothing to upload.
            return Ok((G1Projective::identity(), Duration::ZERO, Duration::ZERO));
        }
        let (placement, bases_upload) = self.placement(key, q, n)?;
        match placement {
            Placement::Device(bases) => {
                let t = Instant::now();
                let words = words();
                let scalars = self
                    .msm
                    .upload_scalar_words(&words)
                    .map_err(gpu_msm_err(q.name()))?;
                drop(words);
                let scalar_upload = t.elapsed();
                let sum = self
                    .msm
                    .msm_g1_resident(&bases, &scalars)
                    .map_err(gpu_msm_err(q.name()))?;
                Ok((sum, bases_upload, scalar_upload))
            }
            Placement::Cpu { .. } => {
                // The same sums as the CPU backend, part by part over consecutive bases.
                let all = slice(q.name(), q.bases(key), 0, n)?;
                let mut start = 0;
                let mut sum = G1Projective::identity();
                for (scalars, mask) in parts {
                    let k = mask.map_or(scalars.len(), DensityMask::count_ones);
                    let bases = slice(q.name(), all, start, start + k)?;
                    sum += self
                        .cpu
                        .msm_g1(bases, scalars, *mask)
                        .map_err(msm_err(q.name()))?;
                    start += k;
                }
                Ok((sum, bases_upload, Duration::ZERO))
            }
        }
    }

    fn msm_b_g2(&self, key: &ProvingKey, x: &MsmInputs<'_>) -> Result<G2Projective, ProverError> {
        let (k_in, k_aux) = (x.b_input.count_ones(), x.b_aux.count_ones());
        let b2_in = slice("b_g2_query", key.b_g2_query(), 0, k_in)?;
        let b2_aux = slice("b_g2_query", key.b_g2_query(), k_in, k_in + k_aux)?;
        let i = self
            .cpu
            .msm_g2(b2_in, x.inputs, Some(x.b_input))
            .map_err(msm_err("b_g2 inputs"))?;
        let a = self
            .cpu
            .msm_g2(b2_aux, x.aux, Some(x.b_aux))
            .map_err(msm_err("b_g2 aux"))?;
        Ok(i + a)
    }
}

fn to_reprs(v: Vec<Scalar>) -> Vec<FrRepr> {
    v.par_iter().map(FrRepr::from_scalar).collect()
}

impl ProverBackend for GpuBackend {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn kind(&self) -> BackendKind {
        BackendKind::Gpu
    }

    fn h_scratch_bytes(&self, domain_size: usize) -> u64 {
        // One converted vector beyond a, b, c while converting. After the upload, h's
        // reprs and scalars (64·m) replace a, b, c (96·m), within the prover's charge.
        32 * domain_size as u64
    }

    fn msm_scratch_bytes(&self, n_max_terms: usize) -> u64 {
        // The G2 MSM on the CPU runs while one G1 MSM's scalars are prepared.
        GPU_TERM_BYTES * n_max_terms as u64 + cpu_msm_scratch_bytes(n_max_terms)
    }

    fn h_poly(
        &self,
        abc: AbcEvaluations,
        inputs_released: &mut dyn FnMut(),
    ) -> Result<HOutput, ProverError> {
        let AbcEvaluations { a, b, c } = abc;
        let t = Instant::now();
        let (a, b, c) = (to_reprs(a), to_reprs(b), to_reprs(c));
        let stream = self.gpu.stream().clone();
        let h = self
            .ntt
            .h_poly_device(
                AbcSource::Host {
                    a: &a,
                    b: &b,
                    c: &c,
                },
                &stream,
            )
            .map_err(ntt_err)?;
        // Pageable copies are staged by the driver before the call returns, but wait for
        // the upload event anyway: that is the documented release point.
        h.inputs_uploaded.synchronize().map_err(|code| {
            ntt_err(GpuNttError::Gpu(GpuError::Driver {
                call: "cuEventSynchronize",
                code,
            }))
        })?;
        let mut transfers = t.elapsed();
        drop((a, b, c));
        inputs_released();
        let reprs = gpu_ntt::download_reprs(&self.gpu, &h.coeffs).map_err(ntt_err)?;
        let t = Instant::now();
        let coeffs: Result<Vec<Scalar>, ProverError> = reprs[..h.n_coeffs]
            .par_iter()
            .enumerate()
            .map(|(i, r)| {
                r.to_scalar()
                    .map_err(|_| ntt_err(GpuNttError::NotReduced { index: i }))
            })
            .collect();
        transfers += t.elapsed();
        Ok(HOutput {
            h: coeffs?,
            transfers,
        })
    }

    fn msms(&self, key: &ProvingKey, x: &MsmInputs<'_>) -> Result<MsmOutputs, ProverError> {
        let start = Instant::now();
        let n_in = x.inputs.len();
        let (k_in, k_aux) = (x.b_input.count_ones(), x.b_aux.count_ones());
        let mut timings = MsmTimings::default();
        let proof_words = ProofWords::new(x);
        let (g1, g2) = std::thread::scope(|scope| {
            // G2 on the host while the device does the G1 sums.
            let g2 = scope.spawn(|| {
                let t = Instant::now();
                self.msm_b_g2(key, x).map(|p| (p, t.elapsed()))
            });
            let g1 = (|| -> Result<[G1Projective; 4], ProverError> {
                let mut out = [G1Projective::identity(); 4];
                let jobs: [(Query, usize, Vec<Part<'_>>); 4] = [
                    (Query::H, x.h.len(), vec![(x.h, None)]),
                    (Query::L, x.aux.len(), vec![(x.aux, None)]),
                    (
                        Query::A,
                        n_in + x.a_aux.count_ones(),
                        vec![(x.inputs, None), (x.aux, Some(x.a_aux))],
                    ),
                    (
                        Query::BG1,
                        k_in + k_aux,
                        vec![(x.inputs, Some(x.b_input)), (x.aux, Some(x.b_aux))],
                    ),
                ];
                for (q, n, parts) in jobs {
                    let t = Instant::now();
                    let (sum, bases, scalars) =
                        self.msm_query(key, q, n, &parts, || query_words(q, x, &proof_words))?;
                    let d = t.elapsed();
                    timings.bases_upload += bases;
                    timings.scalar_transfers += scalars;
                    match q {
                        Query::H => timings.h = d,
                        Query::L => timings.l = d,
                        Query::A => timings.a = d,
                        Query::BG1 => timings.b_g1 = d,
                    }
                    out[q as usize] = sum;
                }
                Ok(out)
            })();
            let g2 = g2.join();
            (g1, g2)
        });
        let [h, l, a, b_g1] = g1?;
        let (b_g2, t) = match g2 {
            Ok(r) => r?,
            // The G2 thread only panics on a bug; re-raise it where it belongs.
            Err(panic) => std::panic::resume_unwind(panic),
        };
        timings.b_g2 = t;
        timings.wall = start.elapsed();
        Ok(MsmOutputs {
            h,
            l,
            a,
            b_g1,
            b_g2,
            timings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::SplitMix;

    fn seed() -> u64 {
        let clock = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        let seed = std::env::var("PINION_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(clock);
        eprintln!("seed = {seed}");
        seed
    }

    /// The per-element code the GPU backend used before: filter the scalars by the mask,
    /// then convert, part after part.
    fn reference_words(parts: &[Part<'_>]) -> Vec<u32> {
        let mut words = Vec::new();
        for (scalars, mask) in parts {
            match mask {
                None => words.extend(gpu_msm::scalars_to_words(scalars)),
                Some(mask) => {
                    let selected: Vec<Scalar> = scalars
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| mask.get(*i))
                        .map(|(_, s)| *s)
                        .collect();
                    words.extend(gpu_msm::scalars_to_words(&selected));
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

    #[test]
    fn select_words_matches_per_element_filter() {
        let mut g = SplitMix::new(seed());
        let lens = [
            0usize,
            1,
            63,
            64,
            65,
            4095,
            4096,
            4097,
            3 * 4096 + 130,
            20_000,
        ];
        for &n in &lens {
            let s = scalars(&mut g, n);
            let words = gpu_msm::scalars_to_words(&s);
            for per_mille in [0, 1, 300, 999, 1000] {
                // Masks as long as the scalars, shorter and longer.
                for mask_len in [n, n.saturating_sub(g.below(70)), n + g.below(70)] {
                    let m = mask(&mut g, mask_len, per_mille);
                    let expected = reference_words(&[(&s, Some(&m))]);
                    let mut prefix = vec![7u32; 8 * g.below(3)];
                    let kept = prefix.clone();
                    select_words_into(&mut prefix, &words, &m);
                    assert_eq!(&prefix[..kept.len()], &kept[..], "prefix kept, n = {n}");
                    assert_eq!(
                        &prefix[kept.len()..],
                        &expected[..],
                        "n = {n}, mask len = {mask_len}, density = {per_mille}/1000"
                    );
                }
            }
        }
    }

    #[test]
    fn query_words_match_per_msm_conversion() {
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
            let x = MsmInputs {
                h: &h,
                inputs: &inputs,
                aux: &aux,
                a_aux: &a_aux,
                b_input: &b_input,
                b_aux: &b_aux,
            };
            let w = ProofWords::new(&x);
            let cases: [(Query, Vec<Part<'_>>); 4] = [
                (Query::H, vec![(&h, None)]),
                (Query::L, vec![(&aux, None)]),
                (Query::A, vec![(&inputs, None), (&aux, Some(&a_aux))]),
                (
                    Query::BG1,
                    vec![(&inputs, Some(&b_input)), (&aux, Some(&b_aux))],
                ),
            ];
            // Twice: the second round reuses the words converted in the first.
            for round in 0..2 {
                for (q, parts) in &cases {
                    assert_eq!(
                        &query_words(*q, &x, &w)[..],
                        &reference_words(parts)[..],
                        "{} with {n_in} inputs, {n_aux} aux, round {round}",
                        q.name()
                    );
                }
            }
        }
    }
}
