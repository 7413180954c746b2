//! The GPU backend's proofs are byte-for-byte `groth16::create_proof`'s for the same
//! parameters and (r, s), on SHA-256 (one block), MiMC and random R1CS circuits, through the
//! PCE path and plain synthesis, single proofs and a batch of partitions; they verify.
//! Every test skips loudly without a GPU (and fails under PINION_REQUIRE_GPU=1).

mod common;

use std::sync::Arc;

use bellman::{Circuit, ConstraintSystem, SynthesisError};
use bls12_381::{Bls12, Scalar};
use ff::Field;
use gpu_device::testing::gpu_or_skip;
use gpu_device::Gpu;
use groth16::Parameters;
use groth16_prover::testing::{KeyedChain, MimcChain, RandomR1cs, Sha256Circuit};
use groth16_prover::{
    BasesKind, GpuBackend, GpuPlacement, Prover, ProverConfig, ProverError, ProvingKey, Randomness,
    SelfCheck, Synthesis,
};
use memory_budget::{Budget, Category};
use rand::RngExt;
use srs_store::{SrsStore, StoreConfig, Tier};

use common::*;

fn gpu_prover(gpu: &Gpu, key: ProvingKey, budget: &Budget, placement: GpuPlacement) -> Prover {
    let backend = GpuBackend::with_gpu(gpu.clone(), budget.clone()).with_placement(placement);
    let config = ProverConfig {
        self_check: SelfCheck::Always,
        ..ProverConfig::default()
    };
    Prover::with_backend(Arc::new(key), budget.clone(), config, Box::new(backend))
}

fn pairs(rng: &mut rand::rngs::StdRng, n: usize) -> Vec<Randomness> {
    let mut v: Vec<Randomness> = (0..n).map(|_| Randomness::random(rng)).collect();
    v.push(Randomness::new(Scalar::ZERO, Scalar::ONE));
    v
}

/// How every query of a proof reached its sum.
fn kinds(bases: &[groth16_prover::QueryPlacement]) -> Vec<BasesKind> {
    bases.iter().map(|p| p.kind).collect()
}

/// GPU proofs equal the reference's bytes and verify, with the key's bases in each home
/// the store gives them: the device tier (summed in place), the pinned tier and the host
/// tier (streamed), and in-memory `groth16::Parameters` (converted per proof, streamed),
/// through the PCE path and plain synthesis. The stored key stays in its tier between
/// proofs (no reload), and the store holds its only copy.
fn check<C: Circuit<Scalar> + Clone>(
    gpu: &Gpu,
    name: &str,
    circuit: C,
    public_inputs: &[Scalar],
    params: &Parameters<Bls12>,
    rs: &[Randomness],
) {
    let budget = big_budget();
    let store = SrsStore::new(budget.clone(), StoreConfig::default());
    let (_d1, device_key) = key_via_store(params, &store, &format!("{name}-device"));
    let (_d2, pinned_key) = key_via_store(params, &store, &format!("{name}-pinned"));
    let (_d3, host_key) = key_via_store(params, &store, &format!("{name}-host"));
    let on_device = gpu_prover(gpu, device_key, &budget, GpuPlacement::Auto);
    let pinned = gpu_prover(gpu, pinned_key, &budget, GpuPlacement::Pinned);
    let host = gpu_prover(gpu, host_key, &budget, GpuPlacement::AsLoaded);
    let from_mem = gpu_prover(
        gpu,
        ProvingKey::from_parameters(params),
        &budget,
        GpuPlacement::Auto,
    );
    let (_cache, pce) = record(&budget, name, circuit.clone());
    let runs = [
        (
            "pce, device tier",
            &on_device,
            Some(Tier::Device),
            BasesKind::Resident,
        ),
        (
            "pce, pinned tier",
            &pinned,
            Some(Tier::Pinned),
            BasesKind::Streamed,
        ),
        (
            "pce, host tier",
            &host,
            Some(Tier::Host),
            BasesKind::Streamed,
        ),
        ("plain, in-memory key", &from_mem, None, BasesKind::Streamed),
    ];
    for (i, rs) in rs.iter().enumerate() {
        let want =
            bytes(&groth16::create_proof(circuit.clone(), params, rs.r, rs.s).expect("reference"));
        for (what, prover, tier, kind) in runs {
            let synthesis = match tier {
                Some(_) => Synthesis::Pce(&pce),
                None => Synthesis::Plain,
            };
            let got = prover
                .prove(synthesis, circuit.clone(), *rs)
                .unwrap_or_else(|e| panic!("{name} pair {i} {what}: {e}"));
            assert_eq!(got.backend, "gpu");
            assert_eq!(bytes(&got.proof), want, "{name} pair {i}: {what}");
            // a, b and c on the device, except where the backend keeps VRAM for others
            // (pinned placement) or there is no PCE.
            assert_eq!(
                got.timings.abc_by_backend,
                tier.is_some() && tier != Some(Tier::Pinned),
                "{name} pair {i}: {what}: where a, b, c were evaluated"
            );
            assert!(got.self_checked, "{name} pair {i}: {what}");
            assert!(
                verifies(prover.key(), &got.proof, public_inputs),
                "{name} pair {i}: {what} verifies"
            );
            if tier == Some(Tier::Device) {
                // The same proof from a witness computed outside the prover (a, b and c
                // evaluated from it straight into the pinned staging).
                let w = pce.synthesize_witness(circuit.clone()).expect("witness");
                let from_witness = prover
                    .prove_witness(&pce, w, None, *rs)
                    .unwrap_or_else(|e| panic!("{name} pair {i} {what}, from a witness: {e}"));
                assert_eq!(
                    bytes(&from_witness.proof),
                    want,
                    "{name} pair {i}: {what}, from a witness"
                );
                // The same proof with its inputs copied to the device ahead of the
                // device phase (as an engine does while the device works on another):
                // the witness when the device evaluates a, b and c; with that off, a, b
                // and c evaluated on the host, whose pinned buffers the witness staging
                // writes next (it must wait for the copies). The second backend also runs
                // l, a and b after H's MSM on one stream instead of beside it (what a large
                // proof does by default).
                let host_abc = Prover::with_backend(
                    prover.key_arc().clone(),
                    budget.clone(),
                    prover.config(),
                    Box::new(
                        GpuBackend::with_gpu(gpu.clone(), budget.clone()).with_device_abc(false),
                    ),
                );
                let not_ahead = Prover::with_backend(
                    prover.key_arc().clone(),
                    budget.clone(),
                    prover.config(),
                    Box::new(
                        GpuBackend::with_gpu(gpu.clone(), budget.clone())
                            .with_abc_ahead(false)
                            .with_side_msms(Some(false)),
                    ),
                );
                // Two proofs queued ahead before either's device phase (the second's copy
                // and evaluation queued on the prefetch stream behind the first's): each
                // proof's MSMs read its own h and witness.
                {
                    let mut first = prover
                        .synthesize(Synthesis::Pce(&pce), circuit.clone(), None)
                        .expect("synthesize");
                    let mut second = prover
                        .synthesize(Synthesis::Pce(&pce), circuit.clone(), None)
                        .expect("synthesize");
                    assert!(prover.prefetch(&mut first).expect("prefetch"));
                    assert!(prover.prefetch(&mut second).expect("prefetch"));
                    for (k, s) in [first, second].into_iter().enumerate() {
                        let computed = prover.compute(s).expect("compute");
                        let done = prover.assemble(computed, *rs, true, 0).unwrap_or_else(|e| {
                            panic!("{name} pair {i} {what}, queued ahead {k}: {e}")
                        });
                        assert_eq!(
                            bytes(&done.proof),
                            want,
                            "{name} pair {i}: {what}, proof {k} of two queued ahead"
                        );
                    }
                }
                for (how, p) in [
                    ("witness, a, b, c evaluated ahead", prover),
                    ("witness", &not_ahead),
                    ("host a, b, c", &host_abc),
                ] {
                    let mut synthesized = p
                        .synthesize(Synthesis::Pce(&pce), circuit.clone(), None)
                        .expect("synthesize");
                    let queued = p.prefetch(&mut synthesized).expect("prefetch");
                    assert!(
                        queued,
                        "{name} pair {i} {how}: room on the device for the copies"
                    );
                    assert!(p.prefetch(&mut synthesized).expect("again"), "idempotent");
                    let computed = p.compute(synthesized).expect("compute");
                    let prefetched = p.assemble(computed, *rs, true, 0).unwrap_or_else(|e| {
                        panic!("{name} pair {i} {what}, {how} prefetched: {e}")
                    });
                    assert_eq!(
                        bytes(&prefetched.proof),
                        want,
                        "{name} pair {i}: {what}, {how} copied ahead"
                    );
                    assert_eq!(prefetched.timings.abc_by_backend, how != "host a, b, c");
                }
            }
            assert_eq!(prover.key().tier(), tier, "{name} pair {i}: {what}");
            let k = kinds(&got.bases);
            assert!(
                !k.is_empty() && k.iter().all(|k| *k == kind),
                "{name} pair {i} {what}: {k:?}"
            );
        }
    }
    let stats = store.stats();
    assert!(
        stats.tier_bytes[0] > 0,
        "{name}: the device tier holds a key"
    );
    assert!(
        budget.snapshot().used_in(Category::Srs) > 0,
        "{name}: the pinned and host tiers are charged"
    );
    drop((on_device, pinned, host));
    assert_eq!(
        budget.snapshot().used_in(Category::WorkingSet),
        0,
        "{name}: every working set returned"
    );
    assert_eq!(
        budget.snapshot().used_in(Category::Transient),
        0,
        "{name}: converted bases returned"
    );
}

/// A witness that breaks a constraint is refused with the row the CPU backend names,
/// through the PCE path (a, b, c evaluated and checked on the device; and, with that off,
/// evaluated into the backend's pinned buffers and checked there) and plain synthesis; no
/// proof, every working set returned.
#[test]
fn gpu_rejects_unsatisfied_witness() {
    let Some(gpu) = gpu_or_skip("groth16-prover") else {
        return;
    };
    let mut rng = rng(seed());
    let circuit = RandomR1cs {
        n_inputs: 3,
        n_constraints: 700,
        shape_seed: rng.random(),
        value_seed: rng.random(),
        corrupt: false,
    };
    let params = generate(circuit.clone(), &mut rng);
    let budget = big_budget();
    let on_gpu = gpu_prover(
        &gpu,
        ProvingKey::from_parameters(&params),
        &budget,
        GpuPlacement::Auto,
    );
    let on_cpu = prover(
        ProvingKey::from_parameters(&params),
        &budget,
        ProverConfig {
            backend: groth16_prover::BackendChoice::Cpu,
            ..ProverConfig::default()
        },
    );
    let host_abc = Prover::with_backend(
        on_gpu.key_arc().clone(),
        budget.clone(),
        on_gpu.config(),
        Box::new(GpuBackend::with_gpu(gpu.clone(), budget.clone()).with_device_abc(false)),
    );
    let (_cache, pce) = record(&budget, "gpu-unsatisfied", circuit.clone());
    let bad = RandomR1cs {
        corrupt: true,
        ..circuit
    };
    let rs = Randomness::random(&mut rng);
    for synthesis in [Synthesis::Pce(&pce), Synthesis::Plain] {
        let row_of = |p: &Prover| match p.prove(synthesis, bad.clone(), rs) {
            Err(ProverError::Unsatisfied {
                row, n_constraints, ..
            }) => {
                assert!(row < n_constraints, "{synthesis:?}: a circuit row");
                row
            }
            other => panic!("{synthesis:?}: expected Unsatisfied, got {other:?}"),
        };
        let want = row_of(&on_cpu);
        assert_eq!(row_of(&on_gpu), want, "{synthesis:?}");
        assert_eq!(row_of(&host_abc), want, "{synthesis:?}, host a, b, c");
    }
    assert_eq!(budget.snapshot().used_in(Category::WorkingSet), 0);
}

#[test]
fn gpu_random_r1cs_matches_reference() {
    let Some(gpu) = gpu_or_skip("groth16-prover") else {
        return;
    };
    let mut rng = rng(seed());
    for (n_inputs, n_constraints) in [(0usize, 1usize), (1, 20), (4, 300), (9, 1500)] {
        let circuit = RandomR1cs {
            n_inputs,
            n_constraints,
            shape_seed: rng.random(),
            value_seed: rng.random(),
            corrupt: false,
        };
        let params = generate(circuit.clone(), &mut rng);
        let inputs = circuit.public_inputs();
        let rs = pairs(&mut rng, 2);
        let name = format!("gpu-random-{n_inputs}-{n_constraints}");
        check(&gpu, &name, circuit, &inputs, &params, &rs);
    }
}

#[test]
fn gpu_mimc_matches_reference() {
    let Some(gpu) = gpu_or_skip("groth16-prover") else {
        return;
    };
    let mut rng = rng(seed());
    let circuit = MimcChain::new(400, rng.random());
    let params = generate(circuit.clone(), &mut rng);
    let rs = pairs(&mut rng, 2);
    check(
        &gpu,
        "gpu-mimc-400",
        circuit.clone(),
        &[circuit.output()],
        &params,
        &rs,
    );
}

#[test]
fn gpu_sha256_one_block_matches_reference() {
    let Some(gpu) = gpu_or_skip("groth16-prover") else {
        return;
    };
    let mut rng = rng(seed());
    let circuit = Sha256Circuit::with_blocks(1, rng.random());
    let params = generate(circuit.clone(), &mut rng);
    let rs = pairs(&mut rng, 1);
    check(
        &gpu,
        "gpu-sha256-1",
        circuit.clone(),
        &circuit.public_inputs(),
        &params,
        &rs,
    );
}

#[test]
fn gpu_batch_of_partitions_matches_reference() {
    let Some(gpu) = gpu_or_skip("groth16-prover") else {
        return;
    };
    let mut rng = rng(seed());
    // Partitions share the R1CS (the round constants are coefficients of the
    // constraints), and differ in the secret start value and so in the public output.
    let base = MimcChain::new(300, rng.random());
    let circuits: Vec<MimcChain> = (0..4)
        .map(|_| MimcChain {
            x0: Scalar::random(&mut rng),
            ..base.clone()
        })
        .collect();
    let params = generate(circuits[0].clone(), &mut rng);
    let budget = big_budget();
    let prover = gpu_prover(
        &gpu,
        ProvingKey::from_parameters(&params),
        &budget,
        GpuPlacement::Auto,
    );
    let (_cache, pce) = record(&budget, "gpu-mimc-batch", circuits[0].clone());
    let rs: Vec<Randomness> = (0..circuits.len())
        .map(|_| Randomness::random(&mut rng))
        .collect();
    let out = prover
        .prove_batch(Synthesis::Pce(&pce), circuits.clone(), &rs)
        .expect("gpu batch");
    assert_eq!(out.proofs.len(), circuits.len());
    for (i, (got, c)) in out.proofs.iter().zip(&circuits).enumerate() {
        let want = groth16::create_proof(c.clone(), &params, rs[i].r, rs[i].s).expect("reference");
        assert_eq!(bytes(&got.proof), bytes(&want), "partition {i}");
        assert!(got.self_checked, "partition {i}");
        assert!(verifies(prover.key(), &got.proof, &[c.output()]));
    }
    assert_eq!(budget.snapshot().used_in(Category::WorkingSet), 0);
}

/// The staging pool's charge shows in the budget (`Category::PinnedPool`) and in each
/// proof's peak; a second proof of the same shape reuses the pool's buffers; under budget
/// pressure the idle buffers are evicted and the next proof still matches the reference.
#[test]
fn gpu_staging_pool_is_charged_reused_and_evictable() {
    let Some(gpu) = gpu_or_skip("groth16-prover") else {
        return;
    };
    let mut rng = rng(seed());
    let circuit = MimcChain::new(700, rng.random());
    let params = generate(circuit.clone(), &mut rng);
    // a, b, c evaluated on the device (the witness's one pinned buffer), then on the host
    // (three pinned buffers for a, b and c).
    for device_abc in [true, false] {
        staging_pool_round_trip(&gpu, &circuit, &params, device_abc, &mut rng);
    }
}

fn staging_pool_round_trip(
    gpu: &Gpu,
    circuit: &MimcChain,
    params: &Parameters<Bls12>,
    device_abc: bool,
    rng: &mut rand::rngs::StdRng,
) {
    let budget = big_budget();
    let prover = Prover::with_backend(
        Arc::new(ProvingKey::from_parameters(params)),
        budget.clone(),
        ProverConfig {
            self_check: SelfCheck::Always,
            ..ProverConfig::default()
        },
        Box::new(GpuBackend::with_gpu(gpu.clone(), budget.clone()).with_device_abc(device_abc)),
    );
    let (_cache, pce) = record(&budget, "gpu-staging", circuit.clone());
    let pinned = |b: &Budget| b.snapshot().used_in(Category::PinnedPool);
    let mut charged_after_first = 0;
    for round in 0..3 {
        let rs = Randomness::random(rng);
        let want = bytes(&groth16::create_proof(circuit.clone(), params, rs.r, rs.s).unwrap());
        let got = prover
            .prove(Synthesis::Pce(&pce), circuit.clone(), rs)
            .unwrap();
        assert_eq!(bytes(&got.proof), want, "round {round}");
        assert_eq!(got.timings.abc_by_backend, device_abc, "round {round}");
        let m = got.shape.domain_size as u64;
        // The pool's buffer for the witness holds its size class of inputs and aux.
        let n_w = got.shape.n_inputs + got.shape.n_aux;
        let staged = if device_abc {
            8 * gpu_device::size_class(4 * n_w) as u64
        } else {
            3 * 32 * m
        };
        assert!(
            got.pinned_staging_peak_bytes >= staged,
            "round {round} (device a, b, c: {device_abc}): staging peak {} < {}",
            got.pinned_staging_peak_bytes,
            staged
        );
        assert!(got.peak_charged_bytes > got.pinned_staging_peak_bytes);
        assert!(
            got.timings.h_device > std::time::Duration::ZERO,
            "round {round}"
        );
        let now = pinned(&budget);
        assert!(now > 0, "idle staging buffers stay charged");
        if round == 0 {
            charged_after_first = now;
            let s = &got.shape;
            assert!(
                s.n_inputs + s.n_aux <= s.domain_size,
                "{} inputs + {} aux over a domain of {}: the check below needs them within",
                s.n_inputs,
                s.n_aux,
                s.domain_size
            );
            // The MSMs staged their scalars (and masks) in the proof's own buffers (the
            // working set counts on it): the pool made those and no more.
            assert_eq!(now, staged, "pool after the first proof ({device_abc})");
        } else if round == 1 {
            assert_eq!(
                now, charged_after_first,
                "same shape: buffers reused, none added"
            );
        } else {
            // After the eviction below: charged again for what this proof needed.
            assert!(now > 0);
        }
        assert_eq!(budget.snapshot().used_in(Category::WorkingSet), 0);
        if round == 1 {
            // Someone else needs everything the budget has left and more: the pool's
            // idle buffers go.
            let want_bytes = budget.available_bytes() + now;
            let taken = budget
                .reserve(
                    want_bytes,
                    Category::Other,
                    "pressure",
                    Some(std::time::Duration::ZERO),
                )
                .expect("eviction of idle staging makes room");
            assert_eq!(pinned(&budget), 0, "every idle staging buffer evicted");
            drop(taken);
        }
    }
}

/// The H step leaves h on the device; copied back it equals the CPU backend's h, for
/// the prover's padded a, b, c (pinned staging) and for unpadded ones (pageable path).
#[test]
fn gpu_device_h_matches_cpu_h() {
    use gpu_ntt::AbcEvaluations;
    use groth16_prover::{CpuBackend, HPoly, ProverBackend};
    let Some(gpu) = gpu_or_skip("groth16-prover") else {
        return;
    };
    let mut rng = rng(seed());
    let budget = big_budget();
    let backend = GpuBackend::with_gpu(gpu.clone(), budget.clone());
    let cpu = CpuBackend::new(budget.clone());
    for n in [1usize, 2, 1 << 10, 1000, (1 << 14) + 3, 1 << 16] {
        let v = |rng: &mut rand::rngs::StdRng| -> Vec<Scalar> {
            (0..n).map(|_| Scalar::random(&mut *rng)).collect()
        };
        let abc = AbcEvaluations {
            a: v(&mut rng),
            b: v(&mut rng),
            c: v(&mut rng),
        };
        let copy = AbcEvaluations {
            a: abc.a.clone(),
            b: abc.b.clone(),
            c: abc.c.clone(),
        };
        let mut released = 0;
        let got = backend.h_poly(abc, &mut || released += 1).unwrap();
        assert_eq!(released, 1, "n = {n}: a, b, c released once");
        let HPoly::Backend(d) = got.h else {
            panic!("n = {n}: the gpu backend keeps h on the device")
        };
        let want = match cpu.h_poly(copy, &mut || {}).unwrap().h {
            HPoly::Host(h) => h,
            HPoly::Backend(_) => panic!("the cpu backend returns h on the host"),
        };
        assert_eq!(d.len(), want.len(), "n = {n}");
        assert_eq!(d.into_host().unwrap(), want, "n = {n}");
    }
    assert!(backend.pinned_pool().charged_bytes() > 0);
    assert_eq!(
        budget.snapshot().used_in(Category::PinnedPool),
        backend.pinned_pool().charged_bytes()
    );
}

/// The GPU backend's MSMs from a host h (not its own H step) equal the CPU backend's.
#[test]
fn gpu_msms_from_host_h_match_cpu() {
    use gpu_msm::DensityMask;
    use groth16_prover::{CpuBackend, HPoly, MsmInputs, ProverBackend};
    let Some(gpu) = gpu_or_skip("groth16-prover") else {
        return;
    };
    let mut rng = rng(seed());
    let circuit = MimcChain::new(200, rng.random());
    let params = generate(circuit, &mut rng);
    let key = ProvingKey::from_parameters(&params);
    let budget = big_budget();
    let backend = GpuBackend::with_gpu(gpu.clone(), budget.clone());
    let cpu = CpuBackend::new(budget.clone());
    let random = |rng: &mut rand::rngs::StdRng, n: usize| -> Vec<Scalar> {
        (0..n)
            .map(|i| match i % 3 {
                0 => Scalar::random(&mut *rng),
                1 => Scalar::ONE,
                _ => Scalar::ZERO,
            })
            .collect()
    };
    let lens = key.lens();
    let h = random(&mut rng, lens.h);
    let inputs = random(&mut rng, 2);
    let aux = random(&mut rng, lens.l);
    // As many set bits as the key's a and b queries have bases, the rest clear.
    let n_a = lens.a.saturating_sub(inputs.len());
    let a_aux = DensityMask::from_bools((0..aux.len()).map(|i| i < n_a));
    let n_b = lens.b_g1.min(lens.b_g2);
    let k_in = n_b.min(inputs.len());
    let b_input = DensityMask::from_bools((0..inputs.len()).map(|i| i < k_in));
    let b_aux = DensityMask::from_bools((0..aux.len()).map(|i| i < n_b - k_in));
    let x = MsmInputs {
        inputs: &inputs,
        aux: &aux,
        a_aux: &a_aux,
        b_input: &b_input,
        b_aux: &b_aux,
    };
    let got = backend
        .msms(&backend.view_key(&key).unwrap(), HPoly::Host(h.clone()), &x)
        .unwrap();
    let want = cpu
        .msms(&cpu.view_key(&key).unwrap(), HPoly::Host(h.clone()), &x)
        .unwrap();
    let same = [
        ("h", got.h == want.h),
        ("l", got.l == want.l),
        ("a", got.a == want.a),
        ("b_g1", got.b_g1 == want.b_g1),
        ("b_g2", got.b_g2 == want.b_g2),
    ];
    assert!(
        same.iter().all(|(_, s)| *s),
        "gpu = cpu per query: {same:?}"
    );
    // Every query ran on the device (h staged from the host, the rest from the witness).
    for p in &got.placement {
        assert_ne!(p.kind, groth16_prover::BasesKind::Cpu, "{}", p.query);
    }
    // A VRAM budget with no room for any query's scalars: every sum falls back to the
    // CPU, reading the bases where they are, and the result does not change.
    let tiny = gpu_device::Gpu::open(0).expect("second handle on device 0");
    tiny.vram_budget().set_total_bytes(4096);
    let starved = GpuBackend::with_gpu(tiny, budget.clone());
    let got = starved
        .msms(&starved.view_key(&key).unwrap(), HPoly::Host(h), &x)
        .unwrap();
    assert_eq!(
        (got.h, got.l, got.a, got.b_g1, got.b_g2),
        (want.h, want.l, want.a, want.b_g1, want.b_g2)
    );
    let placement = got.placement;
    assert!(
        !placement.is_empty() && placement.iter().all(|p| p.kind == BasesKind::Cpu),
        "{placement:?}"
    );
}

/// gpu-ntt's `DeviceR1cs` over a PCE's `matrix_parts` gives the host evaluator's a, b and
/// c bit for bit (long rows, 2-byte codes, a partial last row block, padding rows zero,
/// outputs poisoned first), names the host check's first unsatisfied row, and reports a
/// column out of range as a damaged matrix.
#[test]
fn gpu_device_r1cs_evaluates_as_the_host() {
    use bls_repr::FrRepr;
    use gpu_ntt::DeviceR1cs;
    use pce_cache::{MatrixId, RowBuilder};
    let Some(gpu) = gpu_or_skip("groth16-prover") else {
        return;
    };
    let seed = seed();
    let mut rng = rng(seed);
    let (n_inputs, n_aux) = (4u32, 3000u32);
    let n_cols = n_inputs + n_aux;
    let w: Vec<Scalar> = (0..n_cols)
        .map(|i| {
            if i == 0 {
                Scalar::ONE
            } else if i % 3 == 0 {
                Scalar::from(rng.random_range(0..2u64))
            } else {
                Scalar::random(&mut rng)
            }
        })
        .collect();
    let mut rows = RowBuilder::new(n_inputs, n_aux, None).expect("rows");
    let n_rows = 9 * 256 + 131;
    for r in 0..n_rows {
        let len = match r % 211 {
            7 => rng.random_range(255..700usize),
            8 => 254,
            _ => rng.random_range(0..6usize),
        };
        let term = |rng: &mut rand::rngs::StdRng, k: u64| {
            let v = match rng.random_range(0..4u32) {
                0 => Scalar::ONE,
                1 => -Scalar::ONE,
                _ => Scalar::from(rng.random_range(2..2 + k)),
            };
            (rng.random_range(0..n_cols), v)
        };
        let a: Vec<(u32, Scalar)> = (0..len).map(|_| term(&mut rng, 600)).collect();
        let b: Vec<(u32, Scalar)> = (0..1 + r % 2).map(|_| term(&mut rng, 3)).collect();
        let c: Vec<(u32, Scalar)> = (0..r % 4).map(|_| term(&mut rng, 50)).collect();
        rows.push_row(a, b, c);
    }
    let (pce, _) = rows.finish().expect("pce");
    assert_eq!(pce.code_bytes_of(MatrixId::A), 2, "seed {seed}");
    let m = (n_rows as usize).next_power_of_two();
    let (mut a, mut b, mut c) = (
        pce_cache::zeroed(m),
        pce_cache::zeroed(m),
        pce_cache::zeroed(m),
    );
    let (inputs, aux) = w.split_at(n_inputs as usize);
    pce.evaluate_into(inputs, aux, &mut a, &mut b, &mut c)
        .expect("host");
    let want_bad = pce_cache::first_unsatisfied_row(&a, &b, &c);
    assert!(want_bad.is_some(), "a random witness breaks some row");

    let parts = groth16_prover::sparse_parts;
    let table: Vec<FrRepr> = pce.coefficients().iter().map(FrRepr::from_scalar).collect();
    let shape = (n_rows as usize, n_inputs as usize, n_aux as usize);
    let dev = DeviceR1cs::upload(&gpu, parts(&pce), &table, shape).expect("upload");
    assert!(dev.bytes() > 0);
    let limbs: Vec<FrRepr> = aux.iter().chain(inputs).map(FrRepr::from_scalar).collect();
    let witness = gpu
        .upload(bytemuck::cast_slice::<FrRepr, u64>(&limbs), "test witness")
        .expect("witness");
    let poisoned = || gpu.upload(&vec![u64::MAX; 4 * m], "poisoned").expect("out");
    let (mut da, mut db, mut dc) = (poisoned(), poisoned(), poisoned());
    for kernel in gpu_ntt::SparseKernel::ALL {
        let (mut da, mut db, mut dc) = (poisoned(), poisoned(), poisoned());
        let found = dev
            .queue_evaluate_with(kernel, &gpu, &witness, [&mut da, &mut db, &mut dc], m)
            .and_then(|p| p.wait(&gpu))
            .expect("evaluate");
        assert!(!found.damaged, "{kernel:?}, seed {seed}");
        assert_eq!(found.first_unsatisfied, want_bad, "{kernel:?}, seed {seed}");
        for (what, d, h) in [("a", &da, &a), ("b", &db, &b), ("c", &dc, &c)] {
            let got = gpu.download(d).expect("download");
            let want: Vec<FrRepr> = h.iter().map(FrRepr::from_scalar).collect();
            let want: &[u64] = bytemuck::cast_slice(&want);
            if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
                panic!("{kernel:?} {what}: element {} differs (seed {seed})", i / 4);
            }
        }
    }

    // One column past the last: the kernel skips it and says so.
    let mut bad_cols = pce.matrix_parts(MatrixId::B).cols.to_vec();
    let mid = bad_cols.len() / 2;
    bad_cols[mid] = n_cols;
    let mut damaged = parts(&pce);
    damaged[1].cols = &bad_cols;
    let dev = DeviceR1cs::upload(&gpu, damaged, &table, shape).expect("upload");
    for kernel in gpu_ntt::SparseKernel::ALL {
        let found = dev
            .queue_evaluate_with(kernel, &gpu, &witness, [&mut da, &mut db, &mut dc], m)
            .and_then(|p| p.wait(&gpu))
            .expect("evaluate");
        assert!(found.damaged, "{kernel:?}, seed {seed}");
    }
    // Too short an output or witness is a typed error, before any launch.
    assert!(dev
        .evaluate(
            &gpu,
            &witness,
            [&mut da, &mut db, &mut dc],
            n_rows as usize - 1
        )
        .is_err());
}

/// With tables of precomputed windows (`with_precomputed_windows`), the G1 queries on the
/// device tier are summed over them and the proofs keep the reference's bytes: windows of
/// 2 (128 rows), 8 and 16 bits, a second proof reusing the tables, and a backend whose
/// VRAM budget cannot take a table (its proofs read the bases as they are).
#[test]
fn gpu_precomputed_windows_keep_the_proofs() {
    let Some(gpu) = gpu_or_skip("groth16-prover") else {
        return;
    };
    let mut rng = rng(seed());
    // 40,000 constraints: a 128-row table of h's bases (2-bit windows) is 805 MB, far more
    // than a proof's device scratch (the H step, and H's, l's and B's MSM engines at once:
    // about 100 MB here; 50 MB was measured too little).
    let circuit = MimcChain::new(20000, rng.random());
    let params = generate(circuit.clone(), &mut rng);
    let rs = pairs(&mut rng, 1);
    let inputs = [circuit.output()];
    let budget = big_budget();
    let store = SrsStore::new(budget.clone(), StoreConfig::default());
    let (_cache, pce) = record(&budget, "gpu-precomputed", circuit.clone());
    let config = ProverConfig {
        self_check: SelfCheck::Always,
        ..ProverConfig::default()
    };
    let prove_all = |prover: &Prover, what: &str| -> Vec<Vec<groth16_prover::QueryPlacement>> {
        rs.iter()
            .map(|r| {
                let want = bytes(
                    &groth16::create_proof(circuit.clone(), &params, r.r, r.s).expect("reference"),
                );
                let got = prover
                    .prove(Synthesis::Pce(&pce), circuit.clone(), *r)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(bytes(&got.proof), want, "{what}");
                assert!(verifies(prover.key(), &got.proof, &inputs), "{what}");
                got.bases
            })
            .collect()
    };
    for bits in [2u32, 8, 16] {
        let (_d, key) = key_via_store(&params, &store, &format!("precomputed-{bits}"));
        let backend = Arc::new(
            GpuBackend::with_gpu(gpu.clone(), budget.clone()).with_precomputed_windows(Some(bits)),
        );
        let prover =
            Prover::with_shared_backend(Arc::new(key), budget.clone(), config, backend.clone());
        for placed in prove_all(&prover, &format!("{bits}-bit tables")) {
            // h, l, a and b on G1 over the tables where they have a term for each of the
            // 2^(bits-1) shared buckets (h's 65,535 always), in place otherwise; b on G2
            // in place.
            for p in &placed {
                let tables = p.query != "b_g2_query" && p.n >= 1 << (bits - 1);
                let want = if tables {
                    BasesKind::Precomputed
                } else {
                    BasesKind::Resident
                };
                assert_eq!(p.kind, want, "{bits} bits: {placed:?}");
            }
            assert!(
                placed
                    .iter()
                    .any(|p| p.query == "h_query" && p.kind == BasesKind::Precomputed),
                "{bits} bits: {placed:?}"
            );
        }
        let held = backend.precomputed_bytes();
        assert!(held > 0, "{bits} bits: tables kept");
        prove_all(&prover, &format!("{bits}-bit tables, again"));
        assert_eq!(
            backend.precomputed_bytes(),
            held,
            "{bits} bits: tables reused"
        );
    }
    // Out-of-range bits: no tables.
    let off = GpuBackend::with_gpu(gpu.clone(), budget.clone()).with_precomputed_windows(Some(99));
    assert_eq!(off.precomputed_bytes(), 0);
    // A budget with room for the key (promoted by a first backend), a second backend's own
    // device data and a proof's scratch, but not for h's 128-row table.
    let tight = gpu_device::Gpu::open(0).expect("second handle on device 0");
    let (_d, key) = key_via_store(&params, &store, "precomputed-tight");
    let key = Arc::new(key);
    let plain = Prover::with_backend(
        key.clone(),
        budget.clone(),
        config,
        Box::new(GpuBackend::with_gpu(tight.clone(), budget.clone())),
    );
    prove_all(&plain, "key promoted, no tables");
    let used = tight.vram_budget().snapshot().used_bytes;
    let h_table = 128 * key.lens().h as u64 * 96;
    tight.vram_budget().set_total_bytes(used + h_table / 2);
    let backend = Arc::new(
        GpuBackend::with_gpu(tight.clone(), budget.clone()).with_precomputed_windows(Some(2)),
    );
    let refused = Prover::with_shared_backend(key, budget.clone(), config, backend.clone());
    for placed in prove_all(&refused, "tables refused") {
        let k = kinds(&placed);
        assert!(!k.contains(&BasesKind::Precomputed), "{k:?}");
    }
    assert_eq!(backend.precomputed_bytes(), 0);
}

/// `n_aux` free variables whose sum, the one public input, is enforced twice: through A
/// (times ONE) and through B (ONE times). A wide witness on a domain of 4 points: every
/// variable has a base in l, a and b on both groups, while the H step and H's MSM are tiny.
#[derive(Clone, Debug)]
struct WideSum {
    n_aux: usize,
    seed: u64,
}

impl WideSum {
    fn values(&self) -> impl Iterator<Item = Scalar> {
        let mut g = groth16_prover::testing::SplitMix::new(self.seed);
        (0..self.n_aux).map(move |_| g.scalar())
    }

    fn sum(&self) -> Scalar {
        self.values().sum()
    }
}

impl Circuit<Scalar> for WideSum {
    fn synthesize<CS: bellman::ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellman::SynthesisError> {
        let mut lc = bellman::LinearCombination::zero();
        for (i, v) in self.values().enumerate() {
            lc = lc + cs.alloc(|| format!("x{i}"), || Ok(v))?;
        }
        let sum = cs.alloc_input(|| "sum", || Ok(self.sum()))?;
        cs.enforce(
            || "sum in a",
            |_| lc.clone(),
            |l| l + CS::one(),
            |l| l + sum,
        );
        cs.enforce(|| "sum in b", |l| l + CS::one(), |_| lc, |l| l + sum);
        Ok(())
    }
}

/// A key whose bases are on the device tier still proves when the VRAM budget refuses the
/// MSMs: the CPU sums the refused queries over a host copy of the bases they use (it used
/// to refuse device bases, failing the proof). The budget is cut to what the first proof
/// left in use plus half the witness's device bytes: room for the H step and H's MSM (a
/// domain of 4), none for the witness on the device, so l, a and b on G1 and B on G2 go to
/// the CPU every time, and the proofs keep the reference's bytes.
/// A chain in which every aux variable occurs in some A (A's aux density full), with
/// `inputs` public inputs folded in: `x_{i+1} = (x_i + c_i + p_{i mod k})·x_i`, and a last
/// row `x_n·1 = x_n` that puts the final value in A too.
#[derive(Clone)]
struct DenseChain {
    steps: usize,
    inputs: Vec<Scalar>,
    start: Scalar,
}

impl DenseChain {
    fn output_inputs(&self) -> Vec<Scalar> {
        self.inputs.clone()
    }
}

impl Circuit<Scalar> for DenseChain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let ins: Vec<_> = self
            .inputs
            .iter()
            .map(|v| cs.alloc_input(|| "p", || Ok(*v)))
            .collect::<Result<_, _>>()?;
        let mut x_val = self.start;
        let mut x = cs.alloc(|| "x0", || Ok(x_val))?;
        for i in 0..self.steps {
            let c = Scalar::from(i as u64 + 7);
            let p = ins[i % ins.len()];
            let y_val = (x_val + c + self.inputs[i % ins.len()]) * x_val;
            let y = cs.alloc(|| "x", || Ok(y_val))?;
            cs.enforce(
                || "step",
                |lc| lc + x + (c, CS::one()) + p,
                |lc| lc + x,
                |lc| lc + y,
            );
            x = y;
            x_val = y_val;
        }
        cs.enforce(|| "last", |lc| lc + x, |lc| lc + CS::one(), |lc| lc + x);
        Ok(())
    }
}

/// l and a's aux part over one sort of the aux scalars keep the proofs byte for byte:
/// A dense over the aux (its bases after the inputs read in place, or through a table),
/// A missing some aux (its bases laid out one per aux variable with infinity for the
/// missing, for the proof or in a table), one input or several (a's inputs summed
/// apart), against the two sorts (`with_one_sort_l_a(false)`); the placement names the
/// shared sort exactly where it ran.
#[test]
fn gpu_one_sort_for_l_and_a_keeps_the_proofs() {
    let Some(gpu) = gpu_or_skip("groth16-prover") else {
        return;
    };
    let mut rng = rng(seed());
    let budget = big_budget();
    let store = SrsStore::new(budget.clone(), StoreConfig::default());
    let config = ProverConfig {
        self_check: SelfCheck::Always,
        ..ProverConfig::default()
    };
    let dense = DenseChain {
        steps: 3000,
        inputs: (0..5).map(|_| Scalar::random(&mut rng)).collect(),
        start: Scalar::random(&mut rng),
    };
    // KeyedChain: its 4 keys (in B only) and its last value (in C only) are not in A.
    let keyed = KeyedChain {
        n_constraints: 3000,
        n_keys: 4,
        seed: rng.random(),
    };
    let rs = pairs(&mut rng, 1);
    for (name, a_dense) in [("dense", true), ("keyed", false)] {
        let (params, inputs, pce) = match a_dense {
            true => {
                let params = generate(dense.clone(), &mut rng);
                let (_c, pce) = record(&budget, "one-sort-dense", dense.clone());
                (params, dense.output_inputs(), pce)
            }
            false => {
                let params = generate(keyed.clone(), &mut rng);
                let (_c, pce) = record(&budget, "one-sort-keyed", keyed.clone());
                (params, Vec::new(), pce)
            }
        };
        let prove = |prover: &Prover, what: &str| -> Vec<groth16_prover::QueryPlacement> {
            let mut last = Vec::new();
            for r in &rs {
                let (want, got) = match a_dense {
                    true => (
                        groth16::create_proof(dense.clone(), &params, r.r, r.s),
                        prover.prove(Synthesis::Pce(&pce), dense.clone(), *r),
                    ),
                    false => (
                        groth16::create_proof(keyed.clone(), &params, r.r, r.s),
                        prover.prove(Synthesis::Pce(&pce), keyed.clone(), *r),
                    ),
                };
                let got = got.unwrap_or_else(|e| panic!("{name}, {what}: {e}"));
                assert_eq!(
                    bytes(&got.proof),
                    bytes(&want.expect("reference")),
                    "{name}, {what}"
                );
                assert!(
                    verifies(prover.key(), &got.proof, &inputs),
                    "{name}, {what}"
                );
                last = got.bases;
            }
            last
        };
        let sorted_with = |placed: &[groth16_prover::QueryPlacement]| -> Vec<Option<&str>> {
            placed.iter().map(|p| p.sorted_with).collect()
        };
        for (bits, one_sort) in [
            (None, true),
            (None, false),
            (Some(8u32), true),
            (Some(8), false),
        ] {
            let what = format!("tables {bits:?}, one sort {one_sort}");
            let (_d, key) = key_via_store(&params, &store, &format!("one-sort-{name}-{what}"));
            let backend = GpuBackend::with_gpu(gpu.clone(), budget.clone())
                .with_precomputed_windows(bits)
                .with_one_sort_l_a(one_sort);
            let prover =
                Prover::with_backend(Arc::new(key), budget.clone(), config, Box::new(backend));
            let placed = prove(&prover, &what);
            // In place where A is dense, over a's bases expanded for the proof where it is
            // not (the VRAM budget has room), through tables whenever both have one.
            let shared = one_sort;
            for p in &placed {
                let want = (p.query == "a_query" && shared).then_some("l_query");
                assert_eq!(
                    p.sorted_with,
                    want,
                    "{name}, {what}: {:?}",
                    sorted_with(&placed)
                );
                if bits.is_some() && p.query != "b_g2_query" && p.n >= 128 {
                    assert_eq!(p.kind, BasesKind::Precomputed, "{name}, {what}: {placed:?}");
                }
            }
        }
    }
}

#[test]
fn gpu_device_tier_bases_of_refused_msms_are_summed_on_the_cpu() {
    // A handle of its own, whose VRAM budget is cut below.
    let Some(tight) = gpu_or_skip("groth16-prover") else {
        return;
    };
    let mut rng = rng(seed());
    let circuit = WideSum {
        n_aux: 1 << 18,
        seed: rng.random(),
    };
    let params = generate(circuit.clone(), &mut rng);
    let inputs = [circuit.sum()];
    let rs = pairs(&mut rng, 1);
    let budget = big_budget();
    let store = SrsStore::new(budget.clone(), StoreConfig::default());
    let (_cache, pce) = record(&budget, "gpu-refused-device-tier", circuit.clone());
    let (_d, key) = key_via_store(&params, &store, "refused-device-tier");
    // a, b and c are evaluated on the host: with the circuit's PCE on the device, a
    // witness without room there fails the H step, which is not what this test is about.
    let backend = GpuBackend::with_gpu(tight.clone(), budget.clone()).with_device_abc(false);
    let config = ProverConfig {
        self_check: SelfCheck::Always,
        ..ProverConfig::default()
    };
    let prover = Prover::with_backend(Arc::new(key), budget.clone(), config, Box::new(backend));
    let prove = |r: &Randomness, what: &str| -> Vec<(&'static str, BasesKind)> {
        let want =
            bytes(&groth16::create_proof(circuit.clone(), &params, r.r, r.s).expect("reference"));
        let got = prover
            .prove(Synthesis::Pce(&pce), circuit.clone(), *r)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(bytes(&got.proof), want, "{what}");
        assert!(verifies(prover.key(), &got.proof, &inputs), "{what}");
        assert_eq!(prover.key().tier(), Some(Tier::Device), "{what}");
        got.bases.iter().map(|p| (p.query, p.kind)).collect()
    };
    // Room for everything: the key moves to the device tier, every sum runs there.
    let placed = prove(&rs[0], "room for the msms");
    assert!(
        placed.len() == 5 && placed.iter().all(|(_, k)| *k == BasesKind::Resident),
        "{placed:?}"
    );
    let used = tight.vram_budget().snapshot().used_bytes;
    let witness_bytes = 32 * (inputs.len() + 1 + circuit.n_aux) as u64;
    eprintln!("vram budget cut to {used} + {} bytes", witness_bytes / 2);
    tight
        .vram_budget()
        .set_total_bytes(used + witness_bytes / 2);
    for (i, r) in rs.iter().enumerate() {
        let placed = prove(r, &format!("pair {i}, msms refused"));
        for (query, kind) in &placed {
            let want = match *query {
                "h_query" => BasesKind::Resident,
                _ => BasesKind::Cpu,
            };
            assert_eq!(*kind, want, "pair {i}: {query} in {placed:?}");
        }
        assert_eq!(placed.len(), 5, "{placed:?}");
    }
    assert_eq!(
        budget.snapshot().used_in(Category::Transient),
        0,
        "the cpu fallbacks' host copies returned"
    );
}

/// `y = x²` enforced `k` times over two variables: a domain of about `k` points whose H
/// query is long while l, a and b have a term or two, so the H step and H's MSM are nearly
/// all of a proof's device memory.
#[derive(Clone, Debug)]
struct RepeatedSquare {
    k: usize,
    x: Scalar,
}

impl RepeatedSquare {
    /// `k` constraints over a random `x` from `seed`.
    fn new(k: usize, seed: u64) -> RepeatedSquare {
        RepeatedSquare {
            k,
            x: groth16_prover::testing::SplitMix::new(seed).scalar(),
        }
    }
}

impl Circuit<Scalar> for RepeatedSquare {
    fn synthesize<CS: bellman::ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellman::SynthesisError> {
        let x = cs.alloc(|| "x", || Ok(self.x))?;
        let y = cs.alloc_input(|| "y", || Ok(self.x.square()))?;
        for i in 0..self.k {
            cs.enforce(|| format!("square {i}"), |l| l + x, |l| l + x, |l| l + y);
        }
        Ok(())
    }
}

/// h stays on the device after the H step, and H's MSM reads it in place: when the VRAM
/// budget then refuses that MSM, h is read back (charged to the host budget) and the CPU
/// sums it, instead of the proof failing ("the device refused the h MSM after h was
/// adopted on it"). The VRAM budget is cut to what the first proof left in use plus a
/// growing margin: too small for the H step (a typed error, no proof), then room for the
/// H step but not for H's MSM (h read back: the case under test), then room for both.
/// Every proof that completes keeps the reference's bytes; once one has, none fails.
#[test]
fn gpu_h_of_a_refused_h_msm_is_read_back_and_summed_on_the_cpu() {
    let Some(tight) = gpu_or_skip("groth16-prover") else {
        return;
    };
    let mut rng = rng(seed());
    let circuit = RepeatedSquare::new(60_000, rng.random());
    let m: u64 = 1 << 16;
    let params = generate(circuit.clone(), &mut rng);
    let inputs = [circuit.x.square()];
    let rs = pairs(&mut rng, 1);
    let budget = big_budget();
    let store = SrsStore::new(budget.clone(), StoreConfig::default());
    let (_cache, pce) = record(&budget, "gpu-refused-h", circuit.clone());
    let (_d, key) = key_via_store(&params, &store, "refused-h");
    // a, b and c evaluated on the host (the device-PCE path needs room for the witness
    // too), and l, a and b after H's MSM on one stream, so that the cut decides alone
    // which MSM is refused.
    let backend = GpuBackend::with_gpu(tight.clone(), budget.clone())
        .with_device_abc(false)
        .with_side_msms(Some(false));
    let config = ProverConfig {
        self_check: SelfCheck::Always,
        ..ProverConfig::default()
    };
    let prover = Prover::with_backend(Arc::new(key), budget.clone(), config, Box::new(backend));
    let want: Vec<Vec<u8>> = rs
        .iter()
        .map(|r| bytes(&groth16::create_proof(circuit.clone(), &params, r.r, r.s).expect("ref")))
        .collect();
    let h_kind = |got: &groth16_prover::ProofOutput, what: &str| -> BasesKind {
        assert!(verifies(prover.key(), &got.proof, &inputs), "{what}");
        got.bases
            .iter()
            .find(|p| p.query == "h_query")
            .map(|p| p.kind)
            .unwrap_or_else(|| panic!("{what}: no h_query in {:?}", got.bases))
    };
    // Room for everything: the key moves to the device tier, every sum runs there.
    let first = prover
        .prove(Synthesis::Pce(&pce), circuit.clone(), rs[0])
        .expect("room for everything");
    assert_eq!(bytes(&first.proof), want[0]);
    assert_eq!(h_kind(&first, "room"), BasesKind::Resident);
    assert_eq!(prover.key().tier(), Some(Tier::Device));
    let used = tight.vram_budget().snapshot().used_bytes;
    let (mut extra, mut completed, mut h_on_cpu) = (32 * m, 0usize, 0usize);
    loop {
        tight.vram_budget().set_total_bytes(used + extra);
        let r = rs[completed % rs.len()];
        let what = format!("vram budget {used} + {extra} bytes");
        match prover.prove(Synthesis::Pce(&pce), circuit.clone(), r) {
            Err(e) => {
                eprintln!("{what}: {e}");
                assert_eq!(
                    completed, 0,
                    "{what}: failed after a smaller cut proved: {e}"
                );
            }
            Ok(got) => {
                assert_eq!(bytes(&got.proof), want[completed % rs.len()], "{what}");
                let kind = h_kind(&got, &what);
                eprintln!("{what}: proved, h_query {kind:?}");
                completed += 1;
                match kind {
                    BasesKind::Cpu => h_on_cpu += 1,
                    BasesKind::Resident => break,
                    other => panic!("{what}: h_query summed over {other:?} bases"),
                }
            }
        }
        assert_eq!(
            budget.snapshot().used_in(Category::Transient),
            0,
            "{what}: the read-back h and the fallback's copies returned"
        );
        extra = extra * 5 / 4;
        assert!(
            extra < 1 << 30,
            "no cut up to 1 GiB let H's msm run on the device"
        );
    }
    assert!(
        h_on_cpu > 0,
        "no cut gave the H step room without room for H's msm (step 5/4 from {} bytes)",
        32 * m
    );
}

/// A backend's device PCEs are LRU-evicted residents: when a proof's H step finds no VRAM
/// for its witness and a, b and c, the PCEs of other circuits that no proof holds give
/// theirs (it used to fail: "no device memory for the witness and a, b, c"). Circuit A
/// (a long PCE) and circuit B (a short one) are proved once each through one backend, so
/// both PCEs are on the device; then the VRAM budget is cut below what is in use by A's
/// PCE, plus a growing margin: B's next proof can only have its H step on the device by
/// dropping A's PCE, and every margin below A's PCE's bytes proves that.
#[test]
fn gpu_idle_device_pces_give_their_vram_to_a_proof_that_needs_it() {
    let Some(tight) = gpu_or_skip("groth16-prover") else {
        return;
    };
    let mut rng = rng(seed());
    let long = RepeatedSquare::new(60_000, rng.random());
    let short = MimcChain::new(400, rng.random());
    let (params_a, params_b) = (
        generate(long.clone(), &mut rng),
        generate(short.clone(), &mut rng),
    );
    let rs = pairs(&mut rng, 1);
    let budget = big_budget();
    let store = SrsStore::new(budget.clone(), StoreConfig::default());
    let (_cache_a, pce_a) = record(&budget, "gpu-pce-evict-a", long.clone());
    let (_cache_b, pce_b) = record(&budget, "gpu-pce-evict-b", short.clone());
    let (_da, key_a) = key_via_store(&params_a, &store, "pce-evict-a");
    let (_db, key_b) = key_via_store(&params_b, &store, "pce-evict-b");
    let backend = Arc::new(GpuBackend::with_gpu(tight.clone(), budget.clone()));
    let config = ProverConfig {
        self_check: SelfCheck::Always,
        ..ProverConfig::default()
    };
    let prover_a =
        Prover::with_shared_backend(Arc::new(key_a), budget.clone(), config, backend.clone());
    let prover_b =
        Prover::with_shared_backend(Arc::new(key_b), budget.clone(), config, backend.clone());
    let want_b =
        bytes(&groth16::create_proof(short.clone(), &params_b, rs[0].r, rs[0].s).expect("ref"));
    let got = prover_a
        .prove(Synthesis::Pce(&pce_a), long.clone(), rs[0])
        .expect("circuit A with room");
    assert!(verifies(prover_a.key(), &got.proof, &[long.x.square()]));
    let a_bytes = backend.device_pce_bytes();
    let got = prover_b
        .prove(Synthesis::Pce(&pce_b), short.clone(), rs[0])
        .expect("circuit B with room");
    assert_eq!(bytes(&got.proof), want_b);
    let b_bytes = backend.device_pce_bytes() - a_bytes;
    assert!(
        a_bytes > 0 && b_bytes > 0,
        "both PCEs on the device: {a_bytes}, {b_bytes}"
    );
    let used = tight.vram_budget().snapshot().used_bytes;
    eprintln!("device PCEs: A {a_bytes} bytes, B {b_bytes} bytes; vram in use {used}");
    let mut extra = 16 << 10;
    loop {
        assert!(
            extra < a_bytes,
            "no margin below A's PCE ({a_bytes} bytes) let B's H step run on the device"
        );
        let what = format!("vram budget {used} - {a_bytes} + {extra} bytes");
        tight.vram_budget().set_total_bytes(used - a_bytes + extra);
        match prover_b.prove(Synthesis::Pce(&pce_b), short.clone(), rs[0]) {
            Err(e) => eprintln!("{what}: {e}"),
            Ok(got) => {
                assert_eq!(bytes(&got.proof), want_b, "{what}");
                assert!(
                    verifies(prover_b.key(), &got.proof, &[short.output()]),
                    "{what}"
                );
                assert_eq!(
                    backend.device_pce_bytes(),
                    b_bytes,
                    "{what}: only B's PCE is left"
                );
                eprintln!("{what}: proved with A's PCE dropped");
                break;
            }
        }
        extra = extra * 5 / 4;
    }
}
