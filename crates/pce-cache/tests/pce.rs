//! PCE evaluation against full synthesis, densities against groth16, check mode, disk round trip.

mod common;

use bls12_381::{Bls12, Scalar};
use common::*;
use ff::Field;
use pce_cache::{MatrixId, Pce, PceError, Recorder};
use rand::RngExt;

#[test]
fn sha256_one_and_two_blocks_match_full_synthesis() {
    let mut rng = rng(seed("sha256"));
    for n_blocks in [1, 2] {
        let pce = assert_pce_matches(Sha256Circuit::random(n_blocks, &mut rng));
        eprintln!(
            "sha256 {n_blocks} block(s): {} constraints, {} non-zeros, {:.2} bytes/non-zero, {} coefficients, code bytes a/b/c {}/{}/{}",
            pce.shape().n_constraints,
            pce.n_nonzeros(),
            pce.bytes_per_nonzero(),
            pce.n_coefficients(),
            pce.code_bytes_of(MatrixId::A),
            pce.code_bytes_of(MatrixId::B),
            pce.code_bytes_of(MatrixId::C),
        );
        assert!(
            pce.bytes_per_nonzero() <= 9.0,
            "target is at most 9 bytes per non-zero"
        );
    }
}

#[test]
fn sha256_matrices_do_not_depend_on_the_witness() {
    let mut rng = rng(seed("sha256 witness independence"));
    let a = Pce::record(Sha256Circuit::random(1, &mut rng)).unwrap();
    let b = Pce::record(Sha256Circuit {
        n_blocks: 1,
        message: None,
    })
    .unwrap();
    assert_eq!(a.fingerprint(), b.fingerprint());
    // one PCE serves another witness
    assert_pce_matches_with(&a, Sha256Circuit::random(1, &mut rng));
}

#[test]
fn boolean_and_multipack_gadgets_match() {
    let mut rng = rng(seed("boolean"));
    let n = rng.random_range(2..300usize);
    assert_pce_matches(BooleanCircuit::random(n, &mut rng));
}

#[test]
fn mimc_chain_matches_and_uses_wide_codes() {
    let mut rng = rng(seed("mimc"));
    let rounds = rng.random_range(300..500usize);
    let pce = assert_pce_matches(MimcCircuit::random(rounds, &mut rng));
    // every round has its own constant: more than 254 table entries
    assert!(pce.n_coefficients() > 256);
    assert_eq!(pce.code_bytes_of(MatrixId::A), 2);
}

#[test]
fn random_r1cs_matches() {
    let seed = seed("random r1cs");
    let mut rng = rng(seed);
    for round in 0..6 {
        let n = rng.random_range(1..3000usize);
        let wide = round % 2 == 1;
        let circuit = RandomR1cs::random(n, round % 3 == 0, wide, &mut rng);
        assert_pce_matches(circuit);
    }
}

#[test]
fn more_than_65536_distinct_coefficients_use_u32_codes() {
    let mut rng = rng(seed("u32 codes"));
    let mut circuit = RandomR1cs::random(1, false, true, &mut rng);
    // one long row of fresh random coefficients over one aux variable each
    let n = 70_000;
    for _ in 0..n {
        circuit.aux.push(Scalar::random(&mut rng));
    }
    circuit.allocs_before[0].extend(std::iter::repeat_n(false, n));
    let total_aux = circuit.aux.len();
    let row: Vec<(V, Scalar)> = (0..total_aux)
        .map(|j| (V::Aux(j), Scalar::random(&mut rng)))
        .collect();
    circuit.constraints[0].2 = row;
    let pce = assert_pce_matches(circuit);
    assert_eq!(pce.code_bytes_of(MatrixId::C), 4);
}

#[test]
fn empty_circuit_has_only_the_input_row() {
    struct Empty;
    impl bellman::Circuit<Scalar> for Empty {
        fn synthesize<CS: bellman::ConstraintSystem<Scalar>>(
            self,
            _: &mut CS,
        ) -> Result<(), bellman::SynthesisError> {
            Ok(())
        }
    }
    let pce = Pce::record(Empty).unwrap();
    assert_eq!(pce.shape().n_rows, 1);
    assert_eq!(pce.shape().n_constraints, 0);
    let mut a = [Scalar::ZERO; 1];
    let mut b = [Scalar::ONE; 1];
    let mut c = [Scalar::ONE; 1];
    pce.evaluate_into(&[Scalar::ONE], &[], &mut a, &mut b, &mut c)
        .unwrap();
    assert_eq!(
        (a[0], b[0], c[0]),
        (Scalar::ONE, Scalar::ZERO, Scalar::ZERO)
    );
}

/// groth16's generator drops `a_query`/`b_query` points at infinity; their counts must be
/// what the densities say the prover will ask `ParameterSource` for.
#[test]
fn densities_match_groth16_parameters() {
    let mut rng = rng(seed("groth16 densities"));
    let boolean = BooleanCircuit::random(rng.random_range(2..64usize), &mut rng);
    let mimc = MimcCircuit::random(rng.random_range(2..40usize), &mut rng);
    let check = |pce: &Pce, params: &groth16::Parameters<Bls12>| {
        let d = pce.densities();
        assert_eq!(
            params.a.len(),
            d.a_input().count_ones() + d.a_aux().count_ones()
        );
        assert_eq!(
            params.b_g1.len(),
            d.b_input().count_ones() + d.b_aux().count_ones()
        );
        assert_eq!(params.b_g2.len(), params.b_g1.len());
        assert_eq!(params.l.len() as u64, pce.shape().n_aux);
        assert_eq!(params.vk.ic.len() as u64, pce.shape().n_inputs);
    };
    let pce = Pce::record(boolean.clone()).unwrap();
    let params = groth16::generate_random_parameters::<Bls12, _, _>(boolean, &mut rng).unwrap();
    check(&pce, &params);
    let pce = Pce::record(mimc.clone()).unwrap();
    let params = groth16::generate_random_parameters::<Bls12, _, _>(mimc, &mut rng).unwrap();
    check(&pce, &params);
}

#[test]
fn check_mode_reports_first_failing_row() {
    let mut rng = rng(seed("check mode"));
    for _ in 0..4 {
        let n = rng.random_range(2..2000usize);
        let circuit = RandomR1cs::random(n, true, rng.random_bool(0.5), &mut rng);
        let pce = Pce::record(circuit.clone()).unwrap();
        let w = pce.synthesize_witness(circuit.clone()).unwrap();
        assert_eq!(circuit.first_unsatisfied(&w.inputs, &w.aux), None);
        pce.check(&w.inputs, &w.aux).unwrap();

        let mut aux = w.aux.clone();
        let j = rng.random_range(0..aux.len());
        aux[j] += Scalar::ONE;
        let want = circuit.first_unsatisfied(&w.inputs, &aux);
        match (pce.check(&w.inputs, &aux), want) {
            (Ok(()), None) => {}
            (Err(PceError::Unsatisfied { row, .. }), Some(r)) => assert_eq!(row, r as u64),
            (got, want) => panic!("check gave {got:?}, oracle says {want:?}"),
        }
        // the evaluated-vector variant agrees
        let rows = pce.shape().n_rows as usize;
        let (mut a, mut b, mut c) = (
            vec![Scalar::ZERO; rows],
            vec![Scalar::ZERO; rows],
            vec![Scalar::ZERO; rows],
        );
        pce.evaluate_into(&w.inputs, &aux, &mut a, &mut b, &mut c)
            .unwrap();
        assert_eq!(pce_cache::first_unsatisfied_row(&a, &b, &c), want);
    }
}

#[test]
fn bad_shapes_are_typed_errors() {
    let mut rng = rng(seed("shapes"));
    let circuit = MimcCircuit::random(5, &mut rng);
    let pce = Pce::record(circuit.clone()).unwrap();
    let w = pce.synthesize_witness(circuit).unwrap();
    let rows = pce.shape().n_rows as usize;
    let mut ok = vec![Scalar::ZERO; rows];
    let mut short = vec![Scalar::ZERO; rows - 1];
    let mut ok2 = ok.clone();
    let e = pce
        .evaluate_into(&w.inputs, &w.aux, &mut ok, &mut short, &mut ok2)
        .unwrap_err();
    assert!(
        matches!(
            e,
            PceError::ShapeMismatch {
                what: "b buffer length",
                ..
            }
        ),
        "{e}"
    );
    let mut ok3 = ok.clone();
    let e = pce
        .evaluate_into(&w.inputs, &w.aux[1..], &mut ok, &mut ok2, &mut ok3)
        .unwrap_err();
    assert!(matches!(e, PceError::ShapeMismatch { .. }), "{e}");
    // a circuit with another shape is refused by witness synthesis, pipelined or not
    for rounds in [4, 6] {
        let e = pce
            .synthesize_witness(MimcCircuit::random(rounds, &mut rng))
            .unwrap_err();
        assert!(matches!(e, PceError::ShapeMismatch { .. }), "{e}");
        let (mut x, mut y, mut z) = (ok.clone(), ok.clone(), ok.clone());
        let e = pce
            .synthesize_and_evaluate(
                MimcCircuit::random(rounds, &mut rng),
                &mut x,
                &mut y,
                &mut z,
            )
            .unwrap_err();
        assert!(matches!(e, PceError::ShapeMismatch { .. }), "{e}");
    }
}

#[test]
fn unallocated_variable_is_a_typed_error() {
    struct Bad;
    impl bellman::Circuit<Scalar> for Bad {
        fn synthesize<CS: bellman::ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), bellman::SynthesisError> {
            let v = bellman::Variable::new_unchecked(bellman::Index::Aux(3));
            cs.enforce(|| "bad", |lc| lc + v, |lc| lc, |lc| lc);
            Ok(())
        }
    }
    let e = Recorder::record(Bad, None).err().expect("must fail");
    assert!(
        matches!(
            e,
            PceError::UnallocatedVariable {
                kind: "aux",
                index: 3,
                allocated: 0,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn disk_round_trip_is_identical() {
    let mut rng = rng(seed("round trip"));
    let dir = std::env::temp_dir().join(format!(
        "pce-rt-{}-{}",
        std::process::id(),
        rng.random::<u64>()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let circuit = RandomR1cs::random(rng.random_range(100..3000usize), false, true, &mut rng);
    let pce = Pce::record(circuit.clone()).unwrap();
    let path = dir.join("c.pce");
    pce.write_to(&path).unwrap();
    for loaded in [
        Pce::load(&path, Some(&pce.fingerprint())).unwrap(),
        Pce::load_unchecked(&path, None).unwrap(),
    ] {
        assert_eq!(loaded.fingerprint(), pce.fingerprint());
        assert_eq!(loaded.shape(), pce.shape());
        assert_eq!(loaded.n_nonzeros(), pce.n_nonzeros());
        assert_eq!(loaded.matrix_bytes(), pce.matrix_bytes());
        assert_eq!(loaded.file_path(), Some(path.as_path()));
        assert_pce_matches_with(&loaded, circuit.clone());
        // writing the loaded copy gives the same bytes
        let again = dir.join("again.pce");
        loaded.write_to(&again).unwrap();
        assert_eq!(
            std::fs::read(&again).unwrap(),
            std::fs::read(&path).unwrap()
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn evaluation_converts_into_caller_layout() {
    let mut rng = rng(seed("convert"));
    let circuit = RandomR1cs::random(rng.random_range(1..2000usize), false, true, &mut rng);
    let pce = Pce::record(circuit.clone()).unwrap();
    let w = pce.synthesize_witness(circuit).unwrap();
    let n = pce.shape().n_rows as usize;
    let (mut a, mut b, mut c) = (
        vec![Scalar::ZERO; n],
        vec![Scalar::ZERO; n],
        vec![Scalar::ZERO; n],
    );
    pce.evaluate_into(&w.inputs, &w.aux, &mut a, &mut b, &mut c)
        .unwrap();
    // canonical little-endian bytes, into buffers with padding
    let pad = rng.random_range(0..300usize);
    let mut out: Vec<Vec<[u8; 32]>> = (0..3).map(|_| vec![[0xff; 32]; n + pad]).collect();
    let [oa, ob, oc] = &mut out[..] else {
        unreachable!()
    };
    pce.evaluate_into_with(
        &w.inputs,
        &w.aux,
        pce_cache::AbcMut {
            a: oa,
            b: ob,
            c: oc,
        },
        [0u8; 32],
        |s| s.to_bytes(),
    )
    .unwrap();
    for (got, want) in out.iter().zip([&a, &b, &c]) {
        assert!(got[..n]
            .iter()
            .zip(want.iter())
            .all(|(g, w)| *g == w.to_bytes()));
        assert!(got[n..].iter().all(|g| *g == [0u8; 32]));
    }
}

/// SHA-256 at benchmark size (39 blocks, about 2^20 constraints); `PINION_SLOW_TESTS=1` enables it.
#[test]
fn slow_sha256_benchmark_size_matches() {
    if std::env::var("PINION_SLOW_TESTS").as_deref() != Ok("1") {
        eprintln!("slow test disabled (set PINION_SLOW_TESTS=1)");
        return;
    }
    let mut rng = rng(seed("slow sha256"));
    let pce = assert_pce_matches(Sha256Circuit::random(39, &mut rng));
    let w = pce
        .synthesize_witness(Sha256Circuit::random(39, &mut rng))
        .unwrap();
    pce.check(&w.inputs, &w.aux).unwrap();
}

/// `Mᵀ·v` is checked through its defining identity `⟨v, M·w⟩ = ⟨Mᵀ·v, w⟩` for random v and
/// w, against the forward product (itself checked against full synthesis above).
#[test]
fn transposed_product_is_the_adjoint_of_the_forward_product() {
    let mut rng = rng(seed("transposed product"));
    let circuits = [
        Pce::record(MimcCircuit::random(rng.random_range(1..400usize), &mut rng)).unwrap(),
        Pce::record(RandomR1cs::random(
            rng.random_range(1..2000usize),
            true,
            true,
            &mut rng,
        ))
        .unwrap(),
        Pce::record(Sha256Circuit::random(1, &mut rng)).unwrap(),
    ];
    for pce in &circuits {
        let s = pce.shape();
        let random = |n: u64, rng: &mut rand::rngs::StdRng| -> Vec<Scalar> {
            (0..n).map(|_| Scalar::random(&mut *rng)).collect()
        };
        let inputs = random(s.n_inputs, &mut rng);
        let aux = random(s.n_aux, &mut rng);
        let v = random(s.n_rows, &mut rng);
        for m in MatrixId::ALL {
            let mut forward = vec![Scalar::ZERO; s.n_rows as usize];
            pce.evaluate_matrix_into(m, &inputs, &aux, &mut forward)
                .unwrap();
            let mut transposed = vec![Scalar::ONE; s.n_columns() as usize + 1];
            pce.evaluate_transposed_into(m, &v, &mut transposed)
                .unwrap();
            assert_eq!(
                transposed[s.n_columns() as usize],
                Scalar::ONE,
                "slot past the columns kept"
            );
            let lhs: Scalar = v.iter().zip(&forward).map(|(x, y)| x * y).sum();
            let rhs: Scalar = inputs
                .iter()
                .chain(&aux)
                .zip(&transposed)
                .map(|(x, y)| x * y)
                .sum();
            assert_eq!(lhs, rhs, "matrix {m:?}, shape {s:?}");
        }
        let short = vec![Scalar::ZERO; s.n_rows as usize - 1];
        let mut out = vec![Scalar::ZERO; s.n_columns() as usize];
        assert!(matches!(
            pce.evaluate_transposed_into(MatrixId::A, &short, &mut out),
            Err(PceError::ShapeMismatch { .. })
        ));
        assert!(matches!(
            pce.evaluate_transposed_into(MatrixId::A, &v, &mut out[1..]),
            Err(PceError::ShapeMismatch { .. })
        ));
    }
}
