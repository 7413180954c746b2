//! Field multiplication throughput on device 0: Fp, Fr and Fp2 multiplications per
//! second (and the product variants: two-accumulator, 64-bit limbs) from the
//! `*_mul_chain` kernels (independent chains of dependent products held
//! in registers; no memory traffic inside the loop).
//!
//! Timed with CUDA events (created with `CU_EVENT_DEFAULT`, so they record time) around
//! each launch, after warm-up launches (module JIT, clocks); the median of `RUNS` is
//! reported with the spread. Inputs are random reduced elements, not zeros.
//!
//! Usage: `cargo run --release -p gpu-device --example field_bench [iters]`.
//! `PINION_BENCH` lines carry the mul/s for `cargo xtask bench` (the run is short already:
//! `PINION_BENCH_QUICK=1` changes nothing).

use gpu_device::field::{self, ChainKernel, FieldKind};
use gpu_device::{Gpu, GpuError};
use pinion_bench::BenchLine;

const RUNS: usize = 9;
const WARMUP: usize = 2;

fn main() {
    if let Err(e) = run() {
        eprintln!("field_bench: {e}");
        std::process::exit(1);
    }
}

/// Random reduced elements: random words with each top word below the modulus' top word
/// (Fp: 0x1a0111ea, Fr: 0x73eda753).
fn random_words(field: FieldKind, n: usize, state: &mut u64) -> Vec<u32> {
    let (coord_words, top) = match field {
        FieldKind::Fr => (8, 0x73ed_a753u32),
        FieldKind::Fp | FieldKind::Fp2 => (12, 0x1a01_11eau32),
    };
    let mut next = || {
        // splitmix64
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as u32
    };
    let mut out: Vec<u32> = (0..n * field.words()).map(|_| next()).collect();
    for coord in out.chunks_mut(coord_words) {
        coord[coord_words - 1] %= top;
    }
    out
}

fn run() -> Result<(), GpuError> {
    let iters: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(256);
    let gpu = Gpu::open(0)?;
    let info = gpu.info();
    println!(
        "device: {} (sm_{}{}, {} SMs, {:.1} GiB)",
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        info.sm_count,
        info.total_memory_bytes as f64 / (1u64 << 30) as f64
    );
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    println!("seed = {seed}, iters = {iters}, runs = {RUNS} (median), warm-up = {WARMUP}");

    // Enough threads for several waves of full occupancy on every SM.
    let n = info.sm_count as usize * 2048 * 4;
    let mut rows = Vec::new();
    for kernel in ChainKernel::ALL {
        let (kind, label) = (kernel.field(), kernel.label());
        let launch = |a: &_, b: &_, out: &mut _| field::mul_chain(&gpu, kernel, a, b, out, iters);
        let a = gpu.upload(&random_words(kind, n, &mut seed), "bench a")?;
        let b = gpu.upload(&random_words(kind, n, &mut seed), "bench b")?;
        let mut out = gpu.alloc_zeros::<u32>(n * kind.words(), "bench out")?;
        let total_muls = kernel.muls_per_element(iters) * n as u64;
        for _ in 0..WARMUP {
            launch(&a, &b, &mut out)?;
        }
        gpu.stream()
            .synchronize()
            .map_err(|code| GpuError::Driver {
                call: "cuStreamSynchronize",
                code,
            })?;
        let mut times_ms = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            let start = gpu.timing_event()?;
            let end = gpu.timing_event()?;
            start
                .record(gpu.stream())
                .map_err(|code| GpuError::Driver {
                    call: "cuEventRecord",
                    code,
                })?;
            launch(&a, &b, &mut out)?;
            end.record(gpu.stream()).map_err(|code| GpuError::Driver {
                call: "cuEventRecord",
                code,
            })?;
            end.synchronize().map_err(|code| GpuError::Driver {
                call: "cuEventSynchronize",
                code,
            })?;
            let ms = start.elapsed_ms(&end).map_err(|code| GpuError::Driver {
                call: "cuEventElapsedTime",
                code,
            })?;
            times_ms.push(f64::from(ms));
        }
        // Every output element was written with a reduced value (not the zero fill).
        let host = gpu.download(&out)?;
        let n_zero = host
            .chunks(kind.words())
            .filter(|e| e.iter().all(|&w| w == 0))
            .count();
        if n_zero > n / 1000 {
            eprintln!("warning: {n_zero} of {n} outputs are zero for {label}");
        }
        times_ms.sort_by(f64::total_cmp);
        let median = times_ms[RUNS / 2];
        let rate = total_muls as f64 / (median * 1e-3);
        rows.push((
            label,
            n,
            total_muls,
            median,
            times_ms[0],
            times_ms[RUNS - 1],
            rate,
        ));
    }
    println!();
    println!("| field | elements | muls/launch | median ms | min ms | max ms | mul/s |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for &(label, n, total, median, min, max, rate) in &rows {
        println!("| {label} | {n} | {total} | {median:.3} | {min:.3} | {max:.3} | {rate:.3e} |");
    }
    for (label, n, _, _, _, _, rate) in &rows {
        BenchLine {
            what: &format!("gpu {label}"),
            size: format!("{n} threads"),
            ours: *rate,
            peer: None,
            unit: "mul/s",
            lower_is_better: false,
            target: None,
            pass: None,
        }
        .emit();
    }
    Ok(())
}
