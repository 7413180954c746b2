//! a, b and c evaluated on the device from a PCE (gpu-ntt's `DeviceR1cs`, `pce.cu`): the
//! time of the whole evaluation (three mat-vecs and the witness check) and of each matrix
//! alone, for each kernel, against the host's evaluator on all cores.
//!
//! `cargo run --release -p groth16-prover --example device_abc_bench -- [--pce FILE]
//! [--reps N]`: a recorded PCE (e.g. `porep_bench --record-only --pce-out FILE`), or else
//! a synthetic one of 2^20 rows shaped like PoRep's (1–5 terms a row, one row in 1,000 of
//! 929 power-of-two coefficients). Random witness; CUDA events around each run, median of
//! `--reps` after one warm-up. Without a GPU it says so and exits.

use std::error::Error;
use std::time::Instant;

use bls12_381::Scalar;
use bls_repr::FrRepr;
use ff::Field;
use gpu_device::Gpu;
use gpu_ntt::{DeviceR1cs, SparseKernel, SparseParts};
use pce_cache::{MatrixId, Pce, RowBuilder};
use pinion_bench::BenchLine;
use rayon::prelude::*;

type Res<T> = Result<T, Box<dyn Error>>;

fn synthetic() -> Res<Pce> {
    let (n_inputs, n_aux) = (8u32, 1u32 << 20);
    let n_rows = 1usize << 20;
    let mut rows = RowBuilder::new(n_inputs, n_aux, None)?;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let n_cols = u64::from(n_inputs + n_aux);
    for r in 0..n_rows {
        let near = (r as u64 + n_inputs as u64) % n_cols;
        let col = |d: u64| ((near + d) % n_cols) as u32;
        if r % 1000 == 7 {
            let a: Vec<(u32, Scalar)> = (0..929u64)
                .map(|k| (col(k), Scalar::from(1u64 << (k % 64))))
                .collect();
            rows.push_row(a, [(0, Scalar::ONE)], [(col(1), Scalar::ONE)]);
        } else {
            let k = next() % 5 + 1;
            let a: Vec<(u32, Scalar)> = (0..k).map(|d| (col(d * 3), Scalar::ONE)).collect();
            let b = [(col(next() % 64), Scalar::ONE)];
            let c: Vec<(u32, Scalar)> = (0..(next() % 3))
                .map(|d| (col(d + 1), -Scalar::ONE))
                .collect();
            rows.push_row(a, b, c);
        }
    }
    Ok(rows.finish()?.0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let (mut file, mut reps) = (None, 5usize);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--pce" => file = args.next(),
            "--reps" => reps = args.next().ok_or("--reps N")?.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let gpu = match Gpu::open(0) {
        Ok(g) => g,
        Err(e) => {
            println!("device_abc_bench: skipped, no GPU ({e})");
            return Ok(());
        }
    };
    let t = Instant::now();
    let pce = match &file {
        Some(f) => Pce::load(std::path::Path::new(f), None)?,
        None => synthetic()?,
    };
    let s = pce.shape();
    println!(
        "pce: {} ({:.1} s): {} rows, {} inputs, {} aux, nonzeros a {} b {} c {}",
        file.as_deref().unwrap_or("synthetic"),
        t.elapsed().as_secs_f64(),
        s.n_rows,
        s.n_inputs,
        s.n_aux,
        pce.n_nonzeros_of(MatrixId::A),
        pce.n_nonzeros_of(MatrixId::B),
        pce.n_nonzeros_of(MatrixId::C)
    );
    for m in MatrixId::ALL {
        let p = pce.matrix_parts(m);
        let mut lens: Vec<u64> = p.long_len.to_vec();
        lens.sort_unstable();
        let (plus, minus, other) = pce.n_nonzeros_by_kind(m);
        println!(
            "  {m:?}: {} long rows ({} terms), longest {:?}; coefficients +1 {plus}, -1 {minus}, other {other} ({} byte codes)",
            lens.len(),
            lens.iter().sum::<u64>(),
            &lens[lens.len().saturating_sub(3)..],
            p.code_bytes
        );
    }
    let (n_rows, n_in, n_aux) = (s.n_rows as usize, s.n_inputs as usize, s.n_aux as usize);
    let m = n_rows.next_power_of_two();
    let w: Vec<FrRepr> = (0..n_in + n_aux)
        .into_par_iter()
        .map_init(rand::rng, |rng, i| {
            FrRepr::from_scalar(&if i % 2 == 0 {
                Scalar::from((i % 3) as u64 % 2)
            } else {
                Scalar::random(&mut *rng)
            })
        })
        .collect();
    let table: Vec<FrRepr> = pce.coefficients().iter().map(FrRepr::from_scalar).collect();
    let witness = gpu.upload(bytemuck::cast_slice::<FrRepr, u64>(&w), "witness")?;
    let alloc = || gpu.alloc_for_overwrite::<u64>(4 * m, "a, b, c");
    let (mut a, mut b, mut c) = (alloc()?, alloc()?, alloc()?);
    // One matrix alone: the other two empty (every row of length 0).
    let zero_rows = vec![0u8; n_rows];
    let zero_ptr = vec![0u64; n_rows.div_ceil(gpu_ntt::SPARSE_ROW_BLOCK)];
    let empty = SparseParts {
        block_ptr: &zero_ptr,
        row_len: &zero_rows,
        long_row: &[],
        long_len: &[],
        cols: &[],
        codes: &[],
        code_bytes: 1,
    };
    let full = groth16_prover::sparse_parts(&pce);
    let mut cases: Vec<(String, [SparseParts<'_>; 3])> = vec![("a, b, c + check".into(), full)];
    for (k, id) in MatrixId::ALL.into_iter().enumerate() {
        let mut one = [empty; 3];
        one[k] = full[k];
        cases.push((format!("{id:?} alone (+ 2 empty + check)"), one));
    }
    cases.push(("empty (3 zero passes + check)".into(), [empty; 3]));
    let stream = gpu.stream().clone();
    println!("| case | kernel | ms (median of {reps}) |\n|---|---|---:|");
    for (name, p) in &cases {
        let dev = DeviceR1cs::upload(&gpu, *p, &table, (n_rows, n_in, n_aux))?;
        for kernel in SparseKernel::ALL {
            let mut times = Vec::new();
            for rep in 0..=reps {
                let (e0, e1) = (gpu.timing_event()?, gpu.timing_event()?);
                e0.record(&stream)?;
                let pending =
                    dev.queue_evaluate_with(kernel, &gpu, &witness, [&mut a, &mut b, &mut c], m)?;
                e1.record(&stream)?;
                let found = pending.wait(&gpu)?;
                if found.damaged {
                    return Err("the device found the PCE damaged".into());
                }
                if rep > 0 {
                    times.push(f64::from(e0.elapsed_ms(&e1)?));
                }
            }
            let ms = median(times);
            println!("| {name} | {kernel:?} | {ms:.2} |");
            if name.starts_with("a, b, c") {
                let what = format!("pce a/b/c on the device, {kernel:?} kernel");
                BenchLine {
                    what: &what,
                    size: format!("{n_rows} rows"),
                    ours: ms,
                    peer: None,
                    unit: "ms",
                    lower_is_better: true,
                    target: None,
                    pass: None,
                }
                .emit();
            }
        }
    }
    // The host's evaluator on all cores, for scale.
    let (inputs, aux): (Vec<Scalar>, Vec<Scalar>) = {
        let sc: Vec<Scalar> = w
            .iter()
            .map(|r| r.to_scalar().unwrap_or(Scalar::ZERO))
            .collect();
        (sc[..n_in].to_vec(), sc[n_in..].to_vec())
    };
    let (mut ha, mut hb, mut hc) = (
        pce_cache::zeroed(m),
        pce_cache::zeroed(m),
        pce_cache::zeroed(m),
    );
    let t = Instant::now();
    pce.evaluate_into(&inputs, &aux, &mut ha, &mut hb, &mut hc)?;
    println!(
        "host evaluator ({} threads): {:.1} ms",
        rayon::current_num_threads(),
        t.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}
