//! The proving key: one view over a parameter set's five queries and verifying key,
//! whichever home the bases have. There is one copy of the bases, and it is not ours:
//! the caller's `groth16::Parameters`, a `LoadedParams` the key owns, or an `srs-store`
//! entry the key holds a handle on (in bls-repr's layout, in host, pinned or device
//! memory). Backends read the bases where they are ([`ProvingKey::view_host`],
//! [`ProvingKey::view_for_gpu`]); nothing here converts or copies a query.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bls12_381::{Bls12, G1Affine, G2Affine};
use bls_repr::{G1AffineRepr, G2AffineRepr};
use gpu_device::{DeviceBuffer, Gpu};
use gpu_msm::{G1Curve, G2Curve, GpuCurve};
use groth16::{Parameters, PreparedVerifyingKey, VerifyingKey};
use memory_budget::Budget;
use srs_store::{
    Bases, Destination, LoadOptions, LoadedParams, ParamsFile, SrsError, SrsHandle, SrsSpec,
    SrsStore, Tier,
};

use crate::ProverError;

/// Where a [`ProvingKey`]'s points came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// A `groth16::Parameters` value in memory (its vectors are shared, not copied).
    Parameters,
    /// A parameter file loaded through `srs-store` into a `LoadedParams` the key owns.
    File,
    /// An `srs-store` entry the key holds a handle on: shared with every other key and
    /// proof over the same circuit id, moved between tiers by the store.
    Store,
}

/// The G1 queries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum G1Query {
    /// `h_query`.
    H,
    /// `l_query`.
    L,
    /// `a_query`.
    A,
    /// `b_g1_query`.
    BG1,
}

impl G1Query {
    /// The query's name in the paper and in groth16 (`h_query`, ...).
    pub fn name(self) -> &'static str {
        match self {
            G1Query::H => "h_query",
            G1Query::L => "l_query",
            G1Query::A => "a_query",
            G1Query::BG1 => "b_g1_query",
        }
    }
}

/// Number of points in each query.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueryLens {
    /// `h_query`: one point per coefficient of h (domain size − 1).
    pub h: usize,
    /// `l_query`: one point per aux variable.
    pub l: usize,
    /// `a_query`: every input, then the aux variables dense in A.
    pub a: usize,
    /// `b_g1_query`: inputs dense in B, then aux dense in B.
    pub b_g1: usize,
    /// `b_g2_query`: as `b_g1_query`, on G2.
    pub b_g2: usize,
}

impl QueryLens {
    /// The domain of H: h's coefficients plus one, a power of two.
    pub fn domain_size(&self) -> usize {
        (self.h + 1).next_power_of_two()
    }
}

/// One query's bases where they live.
pub enum QueryBases<'a, C: GpuCurve> {
    /// `bls12_381` points (a key over in-memory `groth16::Parameters`).
    Affine(&'a [C::Affine]),
    /// bls-repr's layout in host memory (pageable or pinned).
    Host(&'a [C::Repr]),
    /// bls-repr's layout on a device, as u64 limbs.
    Device {
        /// The limbs.
        limbs: &'a DeviceBuffer<u64>,
        /// Number of points.
        n_points: usize,
        /// The device's ordinal.
        ordinal: usize,
    },
}

impl<C: GpuCurve> std::fmt::Debug for QueryBases<'_, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryBases::Affine(b) => write!(f, "Affine({} points)", b.len()),
            QueryBases::Host(b) => write!(f, "Host({} points)", b.len()),
            QueryBases::Device {
                n_points, ordinal, ..
            } => write!(f, "Device({n_points} points on device {ordinal})"),
        }
    }
}

impl<C: GpuCurve> QueryBases<'_, C> {
    /// Number of points.
    pub fn len(&self) -> usize {
        match self {
            QueryBases::Affine(b) => b.len(),
            QueryBases::Host(b) => b.len(),
            QueryBases::Device { n_points, .. } => *n_points,
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The parameters a proof reads, held for as long as the view lives: a store entry in
/// the view is never evicted (the view holds a handle on it).
pub struct KeyView<'k> {
    key: &'k ProvingKey,
    held: Option<SrsHandle>,
}

impl std::fmt::Debug for KeyView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyView")
            .field("source", &self.key.source())
            .field("tier", &self.tier())
            .finish()
    }
}

/// What a proof in flight holds of its key, owned (no borrow of the key): the store
/// entry, so it is not evicted until the hold drops. Empty for keys that own their bases.
/// [`ProvingKey::view_held`] reads the bases through it again without asking the store
/// (no load, no promotion, no wait): what a proof's compute phase does with the hold its
/// admission took.
#[derive(Debug)]
#[must_use = "the entry is held only while this lives"]
pub struct KeyHold {
    key_id: u64,
    held: Option<SrsHandle>,
}

impl KeyHold {
    /// The tier held (`None` when the key owns its bases).
    pub fn tier(&self) -> Option<Tier> {
        self.held.as_ref().map(SrsHandle::tier)
    }

    /// The [`ProvingKey::id`] of the key it holds.
    pub fn key_id(&self) -> u64 {
        self.key_id
    }
}

impl<'k> KeyView<'k> {
    /// The [`ProvingKey::id`] of the key it reads.
    pub(crate) fn key_id(&self) -> u64 {
        self.key.id
    }

    /// Keeps holding the entry without borrowing the key.
    pub fn into_hold(self) -> KeyHold {
        KeyHold {
            key_id: self.key.id,
            held: self.held,
        }
    }

    /// The key whose bases these are.
    pub fn key(&self) -> &'k ProvingKey {
        self.key
    }

    fn loaded(&self) -> Option<&LoadedParams> {
        match (&self.held, &self.key.params) {
            (Some(h), _) => Some(h),
            (None, KeyParams::Loaded(p)) => Some(p),
            (None, _) => None,
        }
    }

    /// Where the bases are: `None` for in-memory `groth16::Parameters` (host memory).
    pub fn tier(&self) -> Option<Tier> {
        self.loaded().map(|p| tier_of(p.destination()))
    }

    /// A G1 query's bases.
    pub fn g1(&self, q: G1Query) -> QueryBases<'_, G1Curve> {
        if let Some(p) = self.loaded() {
            let bases = match q {
                G1Query::H => p.h_query(),
                G1Query::L => p.l_query(),
                G1Query::A => p.a_query(),
                G1Query::BG1 => p.b_g1_query(),
            };
            return repr_bases::<G1Curve>(bases, p.destination());
        }
        let KeyParams::Parameters(v) = &self.key.params else {
            unreachable!("a key without loaded parameters holds groth16::Parameters")
        };
        QueryBases::Affine(match q {
            G1Query::H => &v.h,
            G1Query::L => &v.l,
            G1Query::A => &v.a,
            G1Query::BG1 => &v.b_g1,
        })
    }

    /// `b_g2_query`'s bases.
    pub fn b_g2(&self) -> QueryBases<'_, G2Curve> {
        if let Some(p) = self.loaded() {
            return repr_bases::<G2Curve>(p.b_g2_query(), p.destination());
        }
        let KeyParams::Parameters(v) = &self.key.params else {
            unreachable!("a key without loaded parameters holds groth16::Parameters")
        };
        QueryBases::Affine(&v.b_g2)
    }
}

/// A loaded query in the view's terms (pinned memory reads like host memory).
fn repr_bases<'a, C: GpuCurve>(
    bases: &'a Bases<C::Repr>,
    destination: &Destination,
) -> QueryBases<'a, C> {
    if let Some(host) = bases.as_host() {
        return QueryBases::Host(host);
    }
    match (bases.as_device(), destination) {
        (Some(limbs), Destination::Device(gpu)) => QueryBases::Device {
            limbs,
            n_points: bases.len(),
            ordinal: gpu.info().ordinal,
        },
        // `as_host` is `None` only for device bases (or a pinned buffer whose pending
        // copy failed, which nothing queues on the store's buffers): report no points,
        // which the prover's shape check turns into `KeyTooSmall`.
        _ => QueryBases::Host(&[]),
    }
}

fn tier_of(d: &Destination) -> Tier {
    match d {
        Destination::Host => Tier::Host,
        Destination::Pinned(_) => Tier::Pinned,
        Destination::Device(_) => Tier::Device,
    }
}

/// How the GPU backend asks for a stored key's bases: the tiers to try, in order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GpuPlacement {
    /// On the device when the VRAM budget admits the whole key plus `headroom_bytes`;
    /// else in pinned host memory; else where they are (host memory, streamed by each
    /// MSM). A key a host reader ([`ProvingKey::view_host`]) viewed in the last minute
    /// is placed as with `Pinned`: one copy both read, not one moved back and forth.
    #[default]
    Auto,
    /// Pinned host memory, else where they are (never the device tier).
    Pinned,
    /// Where they are (no promotion).
    AsLoaded,
}

/// Shared bls12_381 vectors of in-memory parameters.
struct ParamVectors {
    h: Arc<Vec<G1Affine>>,
    l: Arc<Vec<G1Affine>>,
    a: Arc<Vec<G1Affine>>,
    b_g1: Arc<Vec<G1Affine>>,
    b_g2: Arc<Vec<G2Affine>>,
}

/// A key whose bases live in an `SrsStore` entry. The key holds no handle between
/// proofs, so the store may demote or evict the entry while no proof runs; each view
/// asks the store again (a hit costs a file `stat` and a lookup) and holds a handle for
/// its proof.
struct Stored {
    store: SrsStore,
    spec: SrsSpec,
    /// Where the last view found room: what the next one asks for first.
    destination: Mutex<Destination>,
    /// When a host reader (the CPU backend) last viewed the key: while that is recent,
    /// GPU views leave the bases in pinned memory, which both read, instead of trading
    /// one copy back and forth between the device tier and host memory (each trade a
    /// load from the file, and two copies while the last holder finishes).
    host_read_at: Mutex<Option<Instant>>,
}

/// How long after a host reader's view GPU views keep a shared key in pinned memory.
const HOST_SHARE_WINDOW: Duration = Duration::from_secs(60);

enum KeyParams {
    Parameters(ParamVectors),
    Loaded(Box<LoadedParams>),
    Stored(Stored),
}

/// Which H step a key's `h_query` was made for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HStep {
    /// bellman's (groth16, Filecoin): h's `m − 1` coefficients.
    #[default]
    Coefficients,
    /// snarkjs's (a `.zkey`): the m values of a·b − c on the coset `shift·⟨ω⟩`; `h_query`
    /// has m points. Such a key proves only through its own PCE (it has no C matrix: c is
    /// taken as a∘b, as snarkjs does).
    CosetEvaluations {
        /// The coset's shift.
        shift: bls12_381::Scalar,
    },
}

/// The proving key: `h_query`, `l_query`, `a_query`, `b_g1_query`, `b_g2_query` and the
/// verifying key (with its prepared form, for the self-check).
///
/// Invariant: the queries are exactly the parameter set's (no point is dropped or
/// reordered), so slicing them as groth16 does gives groth16's bases. The key never
/// holds a second copy of them: see the module docs.
pub struct ProvingKey {
    vk: VerifyingKey<Bls12>,
    pvk: PreparedVerifyingKey<Bls12>,
    lens: QueryLens,
    params: KeyParams,
    /// Unique per key in this process.
    id: u64,
    /// The H step `h_query` is for.
    h_step: HStep,
}

/// Source of [`ProvingKey::id`].
static NEXT_KEY_ID: AtomicU64 = AtomicU64::new(1);

fn next_key_id() -> u64 {
    NEXT_KEY_ID.fetch_add(1, Ordering::Relaxed)
}

impl std::fmt::Debug for ProvingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProvingKey")
            .field("source", &self.source())
            .field("lens", &self.lens)
            .field("n_ic", &self.vk.ic.len())
            .field("tier", &self.tier())
            .finish()
    }
}

fn lens_of(p: &LoadedParams) -> QueryLens {
    QueryLens {
        h: p.h_query().len(),
        l: p.l_query().len(),
        a: p.a_query().len(),
        b_g1: p.b_g1_query().len(),
        b_g2: p.b_g2_query().len(),
    }
}

fn lock(m: &Mutex<Destination>) -> MutexGuard<'_, Destination> {
    // A destination is replaced whole, so a poisoned slot is still consistent.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ProvingKey {
    /// Shares the vectors of in-memory parameters (no copy, nothing charged). The CPU
    /// backend reads them as they are; the GPU backend streams them to the device for
    /// every MSM (converted per chunk), so for repeated GPU proofs load the parameters
    /// through an [`SrsStore`] instead ([`ProvingKey::from_store`]).
    pub fn from_parameters(params: &Parameters<Bls12>) -> ProvingKey {
        ProvingKey {
            pvk: groth16::prepare_verifying_key(&params.vk),
            vk: params.vk.clone(),
            lens: QueryLens {
                h: params.h.len(),
                l: params.l.len(),
                a: params.a.len(),
                b_g1: params.b_g1.len(),
                b_g2: params.b_g2.len(),
            },
            params: KeyParams::Parameters(ParamVectors {
                h: Arc::clone(&params.h),
                l: Arc::clone(&params.l),
                a: Arc::clone(&params.a),
                b_g1: Arc::clone(&params.b_g1),
                b_g2: Arc::clone(&params.b_g2),
            }),
            id: next_key_id(),
            h_step: HStep::Coefficients,
        }
    }

    /// Takes loaded parameters as they are (bls-repr layout, in whatever memory they were
    /// loaded into, still charged by their own reservation). The verifying key is fully
    /// checked (curve and subgroup); the bases had the checks the load was asked for.
    pub fn from_loaded(params: LoadedParams) -> Result<ProvingKey, ProverError> {
        let vk = verifying_key_from_repr(params.vk())?;
        Ok(ProvingKey {
            pvk: groth16::prepare_verifying_key(&vk),
            vk,
            lens: lens_of(&params),
            params: KeyParams::Loaded(Box::new(params)),
            id: next_key_id(),
            h_step: HStep::Coefficients,
        })
    }

    /// Opens `path` with `srs-store` and loads it under `budget` with `options` (charged
    /// at the load's peak before anything is read), as a key that owns the result. For
    /// keys shared between proofs and moved between tiers, use [`ProvingKey::from_store`].
    pub fn load(
        path: impl AsRef<Path>,
        budget: &Budget,
        options: &LoadOptions,
    ) -> Result<ProvingKey, ProverError> {
        let file = ParamsFile::open(path)?;
        ProvingKey::from_loaded(file.load(budget, options)?)
    }

    /// A key over the store's entry for `spec`. Reads only the verifying key (fully
    /// checked) and the section headers now; the bases are loaded by the first proof (or
    /// [`SrsStore::preload`]), charged at the load's peak. The key holds the entry only
    /// while a proof reads it (a [`KeyView`] or [`KeyHold`]): between proofs the store may
    /// demote or evict it under pressure, and the next proof loads it again. A backend may
    /// move it to another tier ([`ProvingKey::view_for_gpu`], [`ProvingKey::view_host`]).
    pub fn from_store(store: &SrsStore, spec: SrsSpec) -> Result<ProvingKey, ProverError> {
        let vk = verifying_key_from_repr(&store.verifying_key(&spec)?)?;
        let layout = store.layout(&spec)?;
        let [h, l, a, b_g1, b_g2] = layout.bulk().map(|s| s.n_points() as usize);
        let destination = Mutex::new(spec.options.destination.clone());
        Ok(ProvingKey {
            pvk: groth16::prepare_verifying_key(&vk),
            vk,
            lens: QueryLens {
                h,
                l,
                a,
                b_g1,
                b_g2,
            },
            params: KeyParams::Stored(Stored {
                store: store.clone(),
                spec,
                destination,
                host_read_at: Mutex::new(None),
            }),
            id: next_key_id(),
            h_step: HStep::Coefficients,
        })
    }

    /// The same key for another H step (a zkey's points; see [`HStep`]).
    pub(crate) fn with_h_step(mut self, h_step: HStep) -> ProvingKey {
        self.h_step = h_step;
        self
    }

    /// The H step `h_query` was made for.
    pub fn h_step(&self) -> HStep {
        self.h_step
    }

    /// A number no other key of this process has (keys are never equal by content).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The verifying key.
    pub fn vk(&self) -> &VerifyingKey<Bls12> {
        &self.vk
    }

    /// The prepared verifying key (used by the self-check).
    pub fn prepared_vk(&self) -> &PreparedVerifyingKey<Bls12> {
        &self.pvk
    }

    /// Number of points in each query.
    pub fn lens(&self) -> QueryLens {
        self.lens
    }

    /// Where the points came from.
    pub fn source(&self) -> KeySource {
        match self.params {
            KeyParams::Parameters(_) => KeySource::Parameters,
            KeyParams::Loaded(_) => KeySource::File,
            KeyParams::Stored(_) => KeySource::Store,
        }
    }

    /// The store's circuit id of a stored key.
    pub fn circuit_id(&self) -> Option<&str> {
        match &self.params {
            KeyParams::Stored(s) => Some(&s.spec.circuit_id),
            _ => None,
        }
    }

    /// The tier the bases are in now (`None` for in-memory `groth16::Parameters`; for a
    /// stored key, the store's entry, `Mapped` or `Disk` once evicted).
    pub fn tier(&self) -> Option<Tier> {
        match &self.params {
            KeyParams::Parameters(_) => None,
            KeyParams::Loaded(p) => Some(tier_of(p.destination())),
            KeyParams::Stored(s) => s.store.tier_of(&s.spec.circuit_id),
        }
    }

    /// Bytes a load of the key's bases in bls-repr's layout takes (what a stored key's
    /// entry holds once loaded; its load's peak is a few read windows more). 0 for a key
    /// that owns its bases (nothing to load).
    pub fn load_bytes(&self) -> u64 {
        match &self.params {
            KeyParams::Stored(_) => bulk_bytes(&self.lens),
            KeyParams::Loaded(_) | KeyParams::Parameters(_) => 0,
        }
    }

    /// Host bytes the key itself holds charged (0 for in-memory `groth16::Parameters` and
    /// for a stored key, whose entry the store owns and reports).
    pub fn charged_bytes(&self) -> u64 {
        match &self.params {
            KeyParams::Loaded(p) => p.charged_bytes(),
            KeyParams::Parameters(_) | KeyParams::Stored(_) => 0,
        }
    }

    /// The bases `hold` holds (taken from a view of this key), read again without asking
    /// the store: nothing is loaded, promoted or waited for. A hold of another key is
    /// [`ProverError::HoldMismatch`].
    pub fn view_held(&self, hold: &KeyHold) -> Result<KeyView<'_>, ProverError> {
        if hold.key_id != self.id {
            return Err(ProverError::HoldMismatch {
                expected: self.id,
                found: hold.key_id,
            });
        }
        Ok(KeyView {
            key: self,
            held: hold.held.clone(),
        })
    }

    /// The bases where the host can read them. A stored key on the device is brought
    /// to pinned memory (host memory when pinned memory is refused) first: a load from
    /// its file, charged at its peak; the device copy is dropped once no proof holds it.
    /// For a minute after, GPU views of the key leave it pinned (both read it there)
    /// instead of moving it back to the device. A key that owns device-only bases is
    /// [`ProverError::BackendUnavailable`].
    pub fn view_host(&self) -> Result<KeyView<'_>, ProverError> {
        let view = match &self.params {
            KeyParams::Parameters(_) => KeyView {
                key: self,
                held: None,
            },
            KeyParams::Loaded(p) => {
                if matches!(p.destination(), Destination::Device(_)) {
                    return Err(ProverError::BackendUnavailable {
                        backend: "cpu",
                        reason: "the parameter bases were loaded into device memory",
                    });
                }
                KeyView {
                    key: self,
                    held: None,
                }
            }
            KeyParams::Stored(s) => {
                let mut destination = lock(&s.destination);
                *s.host_read_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
                let mut spec = s.spec.clone();
                if let Destination::Device(gpu) = &*destination {
                    // Pinned memory, which the host reads in place and the device streams
                    // from, so the GPU's next proofs need no copy of their own; host
                    // memory when pinned memory is refused.
                    spec.options.destination = Destination::Pinned(gpu.clone());
                    match s.store.get_or_load(&spec) {
                        Ok(handle) => {
                            *destination = spec.options.destination;
                            return Ok(KeyView {
                                key: self,
                                held: Some(handle),
                            });
                        }
                        Err(e) if refused_for_memory(&e) => *destination = Destination::Host,
                        Err(e) => return Err(e.into()),
                    }
                }
                spec.options.destination = destination.clone();
                KeyView {
                    key: self,
                    held: Some(s.store.get_or_load(&spec)?),
                }
            }
        };
        Ok(view)
    }

    /// The bases for a proof on `gpu`. A stored key is moved up to the best tier
    /// `placement` allows (see [`GpuPlacement`]): the device when its VRAM budget admits
    /// the key plus `headroom_bytes` (other idle entries on it may be evicted to make
    /// room), else pinned host memory, else it stays where it is. Refusals for lack of
    /// memory fall through to the next tier; any other failure is an error.
    pub fn view_for_gpu(
        &self,
        gpu: &Gpu,
        placement: GpuPlacement,
        headroom_bytes: u64,
    ) -> Result<KeyView<'_>, ProverError> {
        let KeyParams::Stored(s) = &self.params else {
            return Ok(KeyView {
                key: self,
                held: None,
            });
        };
        let mut destination = lock(&s.destination);
        let on_this_device = match &*destination {
            Destination::Device(g) => g.info().ordinal == gpu.info().ordinal,
            _ => false,
        };
        let is_pinned = matches!(*destination, Destination::Pinned(_));
        let host_reads = s
            .host_read_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|t| t.elapsed() < HOST_SHARE_WINDOW);
        let placement = match placement {
            // Shared with a host reader: pinned memory serves both.
            GpuPlacement::Auto if host_reads => GpuPlacement::Pinned,
            p => p,
        };
        let targets: &[Tier] = match placement {
            _ if on_this_device => &[],
            GpuPlacement::Auto if is_pinned => &[Tier::Device],
            GpuPlacement::Auto => &[Tier::Device, Tier::Pinned],
            GpuPlacement::Pinned if is_pinned => &[],
            GpuPlacement::Pinned => &[Tier::Pinned],
            GpuPlacement::AsLoaded => &[],
        };
        let mut spec = s.spec.clone();
        for &tier in targets {
            spec.options.destination = if tier == Tier::Device {
                let needed = bulk_bytes(&self.lens).saturating_add(headroom_bytes);
                if !vram_admits(gpu, needed) {
                    continue;
                }
                Destination::Device(gpu.clone())
            } else {
                Destination::Pinned(gpu.clone())
            };
            match s.store.get_or_load(&spec) {
                Ok(handle) => {
                    *destination = spec.options.destination.clone();
                    return Ok(KeyView {
                        key: self,
                        held: Some(handle),
                    });
                }
                Err(e) if refused_for_memory(&e) => {
                    metrics::counter!(
                        "pinion_groth16_prover_key_tier_refused_total",
                        "tier" => tier.name()
                    )
                    .increment(1);
                }
                Err(e) => return Err(e.into()),
            }
        }
        // Where the last view found room (or the host, when a refusal left it elsewhere).
        spec.options.destination = match &*destination {
            Destination::Device(g) if g.info().ordinal != gpu.info().ordinal => Destination::Host,
            d => d.clone(),
        };
        let handle = match s.store.get_or_load(&spec) {
            // Evicted from the tier it had and no room there now: host memory.
            Err(e)
                if refused_for_memory(&e)
                    && !matches!(spec.options.destination, Destination::Host) =>
            {
                spec.options.destination = Destination::Host;
                s.store.get_or_load(&spec)?
            }
            other => other?,
        };
        *destination = spec.options.destination.clone();
        Ok(KeyView {
            key: self,
            held: Some(handle),
        })
    }
}

/// Bytes of the key's bases in bls-repr's layout (96 per G1 point, 192 per G2 point).
fn bulk_bytes(l: &QueryLens) -> u64 {
    (l.h + l.l + l.a + l.b_g1) as u64 * 96 + l.b_g2 as u64 * 192
}

/// Whether `gpu`'s VRAM budget can hand out `bytes` now, after asking its evictors
/// (the store's idle device entries) to make room; nothing stays reserved.
fn vram_admits(gpu: &Gpu, bytes: u64) -> bool {
    gpu.vram_budget()
        .request(bytes, memory_budget::Category::Device)
        .label("groth16-prover key placement probe")
        .reserve(Some(std::time::Duration::ZERO))
        .is_ok()
}

/// Whether a load failed because a budget or the driver had no room (the next tier may
/// still work), as opposed to a bad file or a device fault.
fn refused_for_memory(e: &SrsError) -> bool {
    match e {
        SrsError::Budget { .. } | SrsError::Alloc { .. } => true,
        SrsError::Gpu { source, .. } => source.is_vram_refusal(),
        _ => false,
    }
}

/// A verifying key in srs-store's layout as a `groth16::VerifyingKey`, every point fully
/// checked (curve and subgroup).
pub fn verifying_key_from_repr(
    vk: &srs_store::VerifyingKeyRepr,
) -> Result<VerifyingKey<Bls12>, ProverError> {
    let g1 = |query: &'static str, index: usize, p: &G1AffineRepr| {
        p.to_affine().map_err(|source| ProverError::BadPoint {
            query,
            index,
            source,
        })
    };
    let g2 = |query: &'static str, p: &G2AffineRepr| {
        p.to_affine().map_err(|source| ProverError::BadPoint {
            query,
            index: 0,
            source,
        })
    };
    let ic = vk
        .ic
        .iter()
        .enumerate()
        .map(|(index, p)| g1("vk.ic", index, p))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(VerifyingKey {
        alpha_g1: g1("vk.alpha_g1", 0, &vk.alpha_g1)?,
        beta_g1: g1("vk.beta_g1", 0, &vk.beta_g1)?,
        beta_g2: g2("vk.beta_g2", &vk.beta_g2)?,
        gamma_g2: g2("vk.gamma_g2", &vk.gamma_g2)?,
        delta_g1: g1("vk.delta_g1", 0, &vk.delta_g1)?,
        delta_g2: g2("vk.delta_g2", &vk.delta_g2)?,
        ic,
    })
}
