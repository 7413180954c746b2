//! Shared helpers of the engine tests: parameter files, simulated devices (CPU backends
//! behind the device interface, with gates and injected faults), seeds.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bellman::Circuit;
use bls12_381::{Bls12, Scalar};
use bls_repr::FrRepr;
use engine::{CircuitSpec, DeviceConfig, Engine, EngineConfig, PceSource};
use gpu_ntt::AbcEvaluations;
use groth16::Parameters;
use groth16_prover::{
    AbcStorage, BackendKind, BackendOwned, CpuBackend, HOutput, HPoly, KeyView, MsmInputs,
    MsmOutputs, ProverBackend, ProverError, ProvingKey, StagedAbc,
};
use memory_budget::{Budget, Reservation};
use pce_cache::{CacheConfig, CircuitKey, PceCache};
use rand::rngs::StdRng;
use rand::SeedableRng;

pub use groth16_prover::testing::test_seed as seed;

pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A temp directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let p = std::env::temp_dir().join(format!(
            "pinion-engine-{tag}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A circuit's parameters, written to a file in `dir`.
pub struct Registered {
    pub id: String,
    pub params: Parameters<Bls12>,
    pub path: PathBuf,
}

/// Generates parameters for `circuit`, writes them under `dir` and registers the circuit
/// (its PCE recorded in `pces`, held).
pub fn register<C: Circuit<Scalar> + Clone>(
    engine: &Engine,
    pces: &PceCache,
    dir: &TempDir,
    id: &str,
    circuit: C,
    rng: &mut StdRng,
) -> Registered {
    let pce = pces
        .get_or_extract(&CircuitKey::new(id), || circuit.clone())
        .expect("record pce");
    register_with(engine, dir, id, circuit, PceSource::Held(pce), rng)
}

/// [`register`], the PCE fetched from `pces` for each partition (`PceSource::OnDemand`),
/// held only while one runs.
pub fn register_on_demand<C: Circuit<Scalar> + Clone + Send + Sync + 'static>(
    engine: &Engine,
    pces: &Arc<PceCache>,
    dir: &TempDir,
    id: &str,
    circuit: C,
    rng: &mut StdRng,
) -> Registered {
    let (cache, key, shape) = (Arc::clone(pces), CircuitKey::new(id), circuit.clone());
    let source = PceSource::OnDemand(Arc::new(move || {
        cache.get_or_extract(&key, || shape.clone())
    }));
    register_with(engine, dir, id, circuit, source, rng)
}

fn register_with<C: Circuit<Scalar> + Clone>(
    engine: &Engine,
    dir: &TempDir,
    id: &str,
    circuit: C,
    pce: PceSource,
    rng: &mut StdRng,
) -> Registered {
    let params = groth16::generate_random_parameters::<Bls12, _, _>(circuit, rng).expect("setup");
    let path = dir.0.join(format!("{id}.params"));
    let mut bytes = Vec::new();
    params.write(&mut bytes).expect("write params");
    std::fs::write(&path, &bytes).expect("write params file");
    engine
        .register(CircuitSpec {
            id: id.to_string(),
            params: srs_store::SrsSpec::new(id, &path),
            pce,
        })
        .expect("register");
    Registered {
        id: id.to_string(),
        params,
        path,
    }
}

/// A PCE cache in a budget of its own (the PCEs are not what these tests measure).
pub fn pce_cache() -> PceCache {
    PceCache::new(Budget::fixed(1 << 30), CacheConfig::in_memory()).expect("pce cache")
}

/// A gate devices wait at until the test opens it.
#[derive(Default)]
pub struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
    /// Calls that reached the gate.
    pub arrived: AtomicU64,
}

impl Gate {
    pub fn closed() -> Arc<Gate> {
        Arc::new(Gate::default())
    }
    pub fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }
    pub fn close(&self) {
        *self.open.lock().unwrap() = false;
    }
    pub fn pass(&self) {
        self.arrived.fetch_add(1, Ordering::SeqCst);
        let mut g = self.open.lock().unwrap();
        while !*g {
            g = self.cv.wait(g).unwrap();
        }
    }
    /// Waits until `n` calls have reached the gate (or panics after a while).
    pub fn wait_arrivals(&self, n: u64) {
        let start = std::time::Instant::now();
        while self.arrived.load(Ordering::SeqCst) < n {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "only {} of {n} arrivals at the gate",
                self.arrived.load(Ordering::SeqCst)
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

/// A simulated device: the CPU backend, whose MSMs wait at an optional gate and fail with
/// an injected device fault at a given rate.
pub struct TestDevice {
    inner: CpuBackend,
    pub gate: Option<Arc<Gate>>,
    /// Per mille of MSM calls that fail as a device fault would.
    pub fault_per_mille: u64,
    /// Whether the first MSM call fails so whatever the draw (a test that needs at least
    /// one fault then has it for every seed).
    pub fault_first: bool,
    state: AtomicU64,
    pub faults: AtomicU64,
    pub calls: AtomicU64,
    /// `prewarm_staging` calls: (domain size, proofs).
    pub prewarms: Mutex<Vec<(usize, usize)>>,
    /// Make `prewarm_staging` fail as a driver would.
    pub prewarm_fault: std::sync::atomic::AtomicBool,
    /// Lend a, b and c in host buffers of its own (`abc_buffers`, charged to the proof's
    /// working set as staging), as a GPU backend lends pinned ones, so that proofs can be
    /// copied ahead (`prefetch_abc`, counted; nothing is copied).
    pub staged: bool,
    pub prefetches: AtomicU64,
}

/// a, b and c in host vectors a [`TestDevice`] lends, with the charge that pays for them.
struct HostAbc {
    v: [Vec<FrRepr>; 3],
    _charge: Option<Reservation>,
}

impl HostAbc {
    fn zeroed(m: usize, charge: Option<Reservation>) -> HostAbc {
        HostAbc {
            v: std::array::from_fn(|_| vec![FrRepr::default(); m]),
            _charge: charge,
        }
    }
}

impl BackendOwned for HostAbc {
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

impl AbcStorage for HostAbc {
    fn slices_mut(&mut self) -> Result<[&mut [FrRepr]; 3], ProverError> {
        let [a, b, c] = &mut self.v;
        Ok([a, b, c])
    }
}

const ABC_BYTES_PER_POINT: u64 = 3 * std::mem::size_of::<FrRepr>() as u64;

impl TestDevice {
    pub fn new(budget: &Budget, seed: u64) -> TestDevice {
        TestDevice {
            inner: CpuBackend::new(budget.clone()),
            gate: None,
            fault_per_mille: 0,
            fault_first: false,
            state: AtomicU64::new(seed | 1),
            faults: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            prewarms: Mutex::new(Vec::new()),
            prewarm_fault: std::sync::atomic::AtomicBool::new(false),
            staged: false,
            prefetches: AtomicU64::new(0),
        }
    }

    fn draw(&self) -> u64 {
        // xorshift, shared by the device's calls.
        let mut x = self.state.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state.store(x, Ordering::Relaxed);
        x % 1000
    }
}

impl ProverBackend for TestDevice {
    fn name(&self) -> &'static str {
        "test-device"
    }
    fn kind(&self) -> BackendKind {
        BackendKind::Gpu
    }
    fn h_scratch_bytes(&self, m: usize) -> u64 {
        self.inner.h_scratch_bytes(m)
    }
    fn msm_scratch_bytes(&self, n_g1: usize, n_g2: usize) -> u64 {
        self.inner.msm_scratch_bytes(n_g1, n_g2)
    }
    fn prepare(&self, domain_size: usize, wait: Option<Duration>) -> Result<(), ProverError> {
        self.inner.prepare(domain_size, wait)
    }
    fn stages_abc(&self, m: usize) -> bool {
        self.staged && m > 0
    }
    fn staging_bytes(&self, m: usize, _n_max_terms: usize) -> (u64, u64) {
        (
            if self.staged {
                m as u64 * ABC_BYTES_PER_POINT
            } else {
                0
            },
            0,
        )
    }
    fn abc_buffers_within(
        &self,
        m: usize,
        from: &mut Reservation,
    ) -> Result<Option<StagedAbc>, ProverError> {
        if !self.stages_abc(m) {
            return Ok(None);
        }
        let charge = from.split((m as u64 * ABC_BYTES_PER_POINT).min(from.bytes()));
        Ok(Some(StagedAbc::new(m, HostAbc::zeroed(m, Some(charge)))))
    }
    fn abc_buffers(&self, m: usize) -> Result<Option<StagedAbc>, ProverError> {
        Ok(self
            .stages_abc(m)
            .then(|| StagedAbc::new(m, HostAbc::zeroed(m, None))))
    }
    fn prefetch_abc(&self, abc: &mut StagedAbc) -> Result<bool, ProverError> {
        if abc.downcast_mut::<HostAbc>().is_none() {
            return Ok(false);
        }
        self.prefetches.fetch_add(1, Ordering::SeqCst);
        Ok(true)
    }
    fn prewarm_staging(&self, m: usize, proofs: usize) -> Result<u64, ProverError> {
        self.prewarms.lock().unwrap().push((m, proofs));
        if self.prewarm_fault.load(Ordering::SeqCst) {
            return Err(ProverError::GpuUnavailable {
                source: gpu_device::GpuError::NoDriver,
            });
        }
        self.inner.prewarm_staging(m, proofs)
    }
    fn h_poly(
        &self,
        abc: AbcEvaluations,
        released: &mut dyn FnMut(),
    ) -> Result<HOutput, ProverError> {
        self.inner.h_poly(abc, released)
    }
    fn h_coset_evaluations(
        &self,
        abc: AbcEvaluations,
        shift: bls12_381::Scalar,
        released: &mut dyn FnMut(),
    ) -> Result<HOutput, ProverError> {
        self.inner.h_coset_evaluations(abc, shift, released)
    }
    fn h_poly_staged(&self, abc: StagedAbc) -> Result<HOutput, ProverError> {
        self.inner.h_poly_staged(abc)
    }
    fn view_key<'k>(&self, key: &'k ProvingKey) -> Result<KeyView<'k>, ProverError> {
        self.inner.view_key(key)
    }
    fn msms(
        &self,
        bases: &KeyView<'_>,
        h: HPoly,
        x: &MsmInputs<'_>,
    ) -> Result<MsmOutputs, ProverError> {
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        if let Some(g) = &self.gate {
            g.pass();
        }
        let first = self.fault_first && call == 0;
        if first || (self.fault_per_mille > 0 && self.draw() < self.fault_per_mille) {
            self.faults.fetch_add(1, Ordering::Relaxed);
            return Err(ProverError::Msm {
                query: "h_query",
                source: gpu_msm::MsmError::Gpu {
                    backend: "test",
                    message: "injected device fault".into(),
                },
            });
        }
        self.inner.msms(bases, h, x)
    }
}

pub fn device(name: &str, d: Arc<TestDevice>) -> DeviceConfig {
    DeviceConfig::Backend {
        name: name.to_string(),
        backend: d,
    }
}

pub fn config(budget: &Budget, devices: Vec<DeviceConfig>) -> EngineConfig {
    EngineConfig::new(budget.clone(), devices)
}

pub fn proof_bytes(p: &groth16::Proof<Bls12>) -> Vec<u8> {
    let mut v = Vec::new();
    p.write(&mut v).expect("write proof");
    v
}
