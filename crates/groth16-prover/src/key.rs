//! One view over a parameter set: the five queries and the verifying key, whichever
//! source they came from.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bls12_381::{Bls12, G1Affine, G2Affine};
use bls_repr::{G1AffineRepr, G2AffineRepr};
use groth16::{Parameters, PreparedVerifyingKey, VerifyingKey};
use memory_budget::{Budget, Category, Reservation};
use rayon::prelude::*;
use srs_store::{LoadOptions, LoadedParams, ParamsFile};

use crate::ProverError;

/// Where a [`ProvingKey`]'s points came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// A `groth16::Parameters` value in memory (its vectors are shared, not copied).
    Parameters,
    /// A parameter file loaded through `srs-store`, converted once to `bls12_381` points.
    SrsStore,
}

/// The proving key: `h_query`, `l_query`, `a_query`, `b_g1_query`, `b_g2_query` and the
/// verifying key (with its prepared form, for the self-check).
///
/// Invariant: the queries are exactly the parameter set's (no point is dropped or
/// reordered), so slicing them as groth16 does gives groth16's bases. The CPU backend
/// needs `bls12_381` affine points; a key built from `srs-store` therefore holds a
/// converted copy, charged to the budget as [`Category::Srs`] for as long as the key
/// lives (the `LoadedParams` may be dropped once the key exists).
pub struct ProvingKey {
    vk: VerifyingKey<Bls12>,
    pvk: PreparedVerifyingKey<Bls12>,
    h_query: Arc<Vec<G1Affine>>,
    l_query: Arc<Vec<G1Affine>>,
    a_query: Arc<Vec<G1Affine>>,
    b_g1_query: Arc<Vec<G1Affine>>,
    b_g2_query: Arc<Vec<G2Affine>>,
    source: KeySource,
    /// Holds the converted copy's bytes (`None` when the vectors are shared).
    reservation: Option<Reservation>,
    /// Unique per key in this process (what the GPU backend's resident bases are keyed by).
    id: u64,
}

/// Source of [`ProvingKey::id`].
static NEXT_KEY_ID: AtomicU64 = AtomicU64::new(1);

fn next_key_id() -> u64 {
    NEXT_KEY_ID.fetch_add(1, Ordering::Relaxed)
}

impl std::fmt::Debug for ProvingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProvingKey")
            .field("source", &self.source)
            .field("n_h", &self.h_query.len())
            .field("n_l", &self.l_query.len())
            .field("n_a", &self.a_query.len())
            .field("n_b_g1", &self.b_g1_query.len())
            .field("n_b_g2", &self.b_g2_query.len())
            .field("n_ic", &self.vk.ic.len())
            .field("charged_bytes", &self.charged_bytes())
            .finish()
    }
}

impl ProvingKey {
    /// Shares the vectors of in-memory parameters (no copy, nothing charged).
    pub fn from_parameters(params: &Parameters<Bls12>) -> ProvingKey {
        ProvingKey {
            pvk: groth16::prepare_verifying_key(&params.vk),
            vk: params.vk.clone(),
            h_query: Arc::clone(&params.h),
            l_query: Arc::clone(&params.l),
            a_query: Arc::clone(&params.a),
            b_g1_query: Arc::clone(&params.b_g1),
            b_g2_query: Arc::clone(&params.b_g2),
            source: KeySource::Parameters,
            reservation: None,
            id: next_key_id(),
        }
    }

    /// Converts loaded parameters (bls-repr layout) to `bls12_381` points, charging the
    /// copy to `budget` first. The verifying key is fully checked (curve and subgroup); the
    /// bases get the checks the load was asked for (`srs_store::PointCheck`).
    pub fn from_loaded(params: &LoadedParams, budget: &Budget) -> Result<ProvingKey, ProverError> {
        let (h, l, a, b1, b2) = (
            params.h_query().len(),
            params.l_query().len(),
            params.a_query().len(),
            params.b_g1_query().len(),
            params.b_g2_query().len(),
        );
        let bytes = ((h + l + a + b1) * std::mem::size_of::<G1Affine>()
            + b2 * std::mem::size_of::<G2Affine>()) as u64;
        let reservation = budget
            .try_reserve(bytes, Category::Srs, "groth16-prover bls12_381 bases")
            .map_err(|source| ProverError::Budget {
                what: "bls12_381 copy of the parameter bases",
                requested_bytes: bytes,
                source,
            })?;
        let vk = convert_vk(params.vk())?;
        let key = ProvingKey {
            pvk: groth16::prepare_verifying_key(&vk),
            vk,
            h_query: Arc::new(g1_bases("h_query", params.h_query().as_host())?),
            l_query: Arc::new(g1_bases("l_query", params.l_query().as_host())?),
            a_query: Arc::new(g1_bases("a_query", params.a_query().as_host())?),
            b_g1_query: Arc::new(g1_bases("b_g1_query", params.b_g1_query().as_host())?),
            b_g2_query: Arc::new(g2_bases("b_g2_query", params.b_g2_query().as_host())?),
            source: KeySource::SrsStore,
            reservation: Some(reservation),
            id: next_key_id(),
        };
        Ok(key)
    }

    /// Opens `path` with `srs-store`, loads it under `budget` with `options`, converts it
    /// ([`ProvingKey::from_loaded`]) and drops the loaded copy. Peak: the loaded bases
    /// plus the converted ones, both charged.
    pub fn load(
        path: impl AsRef<Path>,
        budget: &Budget,
        options: &LoadOptions,
    ) -> Result<ProvingKey, ProverError> {
        let file = ParamsFile::open(path)?;
        let loaded = file.load(budget, options)?;
        ProvingKey::from_loaded(&loaded, budget)
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
    /// `h_query`: one point per coefficient of h (domain size − 1).
    pub fn h_query(&self) -> &[G1Affine] {
        &self.h_query
    }
    /// `l_query`: one point per aux variable.
    pub fn l_query(&self) -> &[G1Affine] {
        &self.l_query
    }
    /// `a_query`: every input, then the aux variables dense in A.
    pub fn a_query(&self) -> &[G1Affine] {
        &self.a_query
    }
    /// `b_g1_query`: inputs dense in B, then aux dense in B.
    pub fn b_g1_query(&self) -> &[G1Affine] {
        &self.b_g1_query
    }
    /// `b_g2_query`: as `b_g1_query`, on G2.
    pub fn b_g2_query(&self) -> &[G2Affine] {
        &self.b_g2_query
    }
    /// Where the points came from.
    pub fn source(&self) -> KeySource {
        self.source
    }
    /// Bytes this key holds charged to the budget (0 when it shares a `Parameters`).
    pub fn charged_bytes(&self) -> u64 {
        self.reservation.as_ref().map_or(0, Reservation::bytes)
    }
}

fn g1_bases(
    query: &'static str,
    points: Option<&[G1AffineRepr]>,
) -> Result<Vec<G1Affine>, ProverError> {
    let points = points.ok_or(ProverError::BackendUnavailable {
        backend: "cpu",
        reason: "the parameter bases are not in host memory",
    })?;
    points
        .par_iter()
        .enumerate()
        .map(|(index, p)| {
            p.to_affine_unchecked()
                .map_err(|source| ProverError::BadPoint {
                    query,
                    index,
                    source,
                })
        })
        .collect()
}

fn g2_bases(
    query: &'static str,
    points: Option<&[G2AffineRepr]>,
) -> Result<Vec<G2Affine>, ProverError> {
    let points = points.ok_or(ProverError::BackendUnavailable {
        backend: "cpu",
        reason: "the parameter bases are not in host memory",
    })?;
    points
        .par_iter()
        .enumerate()
        .map(|(index, p)| {
            p.to_affine_unchecked()
                .map_err(|source| ProverError::BadPoint {
                    query,
                    index,
                    source,
                })
        })
        .collect()
}

fn convert_vk(vk: &srs_store::VerifyingKeyRepr) -> Result<VerifyingKey<Bls12>, ProverError> {
    let g1 = |query: &'static str, p: &G1AffineRepr| {
        p.to_affine().map_err(|source| ProverError::BadPoint {
            query,
            index: 0,
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
        .map(|(index, p)| {
            p.to_affine().map_err(|source| ProverError::BadPoint {
                query: "vk.ic",
                index,
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(VerifyingKey {
        alpha_g1: g1("vk.alpha_g1", &vk.alpha_g1)?,
        beta_g1: g1("vk.beta_g1", &vk.beta_g1)?,
        beta_g2: g2("vk.beta_g2", &vk.beta_g2)?,
        gamma_g2: g2("vk.gamma_g2", &vk.gamma_g2)?,
        delta_g1: g1("vk.delta_g1", &vk.delta_g1)?,
        delta_g2: g2("vk.delta_g2", &vk.delta_g2)?,
        ic,
    })
}
