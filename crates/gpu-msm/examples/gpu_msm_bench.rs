//! G1 and G2 MSM on the GPU: bases resident, median of timed runs after warm-up, CUDA events.
//!
//! `cargo run --release -p gpu-msm --example gpu_msm_bench [--curves g1,g2] [log2 sizes...]`
//! `--curves` picks the curves (default both); sizes apply to every picked curve (default
//! 16 18 20 22 24 for G1 and 20 24 for G2; add 26 for 2^26: 6 GiB of G1 bases, about 15 GiB
//! of device memory in all). Two timings per size: including the copy of the (canonical)
//! scalars from pinned host memory to the device, as the reference figures do, and with the
//! scalars already on the device. Then Groth16-shaped scalars (30% zeros, 30% ones, 40%
//! uniform) at each curve's largest size, every scalar equal there too (with a chunked
//! accumulation only), and a per-phase breakdown. The recorded reference figures
//! (an H200's) are set beside a run on an H200 only; `PINION_PEER_MSM_CSV=FILE` sets the
//! reference's figures from this same run beside it instead, on any card (what peer-bench's
//! `msm_bench` printed on this machine, e.g. just before this program, uniform and
//! Groth16-shaped: [`pinion_bench::PeerRuns`]). Targets (issue 18): G1 at most 0.8x the
//! reference (with the copy of the scalars, as the reference's figure has it); G2, uniform,
//! 1.5x faster than the H200's 54.95 ms at 2^20 and 532 ms at 2^24 (on an H200 only).
//! The library's default window and kernel are timed; with `PINION_MSM_SWEEP=1` a short
//! sweep per size (scalars resident, median of 3) over windows 8, 13, 16
//! (`PINION_MSM_SWEEP_WINDOWS=16,20` picks others), the accumulation kernels
//! (`PINION_MSM_SWEEP_KERNELS=Capped128,ChunkedCapped` picks some), the chunk lengths of
//! the chunked ones (`PINION_MSM_SWEEP_CHUNKS=128,256`, default 256) and the reduction
//! kernels (`PINION_MSM_SWEEP_REDUCE=Capped`) and the windows per scatter launch
//! (`PINION_MSM_SWEEP_SCATTER=1,4,17`, default the library's rule) picks the configuration
//! that the table then times in full.
//! `PINION_BENCH_QUICK=1`: G1 at 2^16 and 2^18, G2 at 2^16 (unless sizes are given).
//! `PINION_MSM_NO_EQUAL=1` skips the every-scalar-equal row (slow at 2^27).
//! `PINION_VRAM_POOL=driver`: the device's memory pool gives freed memory back at each
//! synchronization, as the driver's default does (`VramPool::DRIVER`; by default it keeps
//! it up to the VRAM budget, `VramPool::KEEP`).
//! `PINION_MSM_SORT=counting|two-level` times every engine with that `SortKind` instead of
//! the library's `Auto` (unless counting, each size's sum is checked against the counting
//! sort's once);
//! `PINION_MSM_TWO_LEVEL=chunk_log,bin_entries_log,place_bins[,staged][,sort=KIB]` its
//! sizes, whether its place pass stages in shared memory and the shared memory a bin-sort
//! block asks for (`TwoLevelParams`).
//! G1 also runs over precomputed windows at the sizes up to 2^24 (`PINION_MSM_PRECOMPUTED=0`
//! skips it; `PINION_MSM_PRECOMPUTED_WINDOWS=16,20,22` the windows, those by default;
//! `PINION_MSM_SHARED_SCATTER=all,18,17,18s,18a` the keys one shared-bucket scatter launch
//! writes, log2 or `all` (one launch), a suffix `s` splitting the ones' keys with the
//! digits', `w` putting them into the digits' last launch, `a` into one launch of their own
//! (`OnesScatter`; no suffix: the library's default), each timed; the library's
//! default alone without it; `PINION_MSM_PRECOMPUTED_SHAPES=uniform,groth16` the scalars,
//! uniform by default; `PINION_MSM_PRECOMPUTED_CHUNKS=2048,4096` the accumulation's entries a
//! thread, the library's default without it).
//! `PINION_BENCH_RUNS` (default 7) timed runs per row. Sizes of 2^24 and more also get a
//! "bases streamed from pinned" row: bases in pinned host memory, copied in chunks of
//! 2^`PINION_MSM_STREAM_CHUNK_LOG` (default 22) on a second stream while the previous
//! chunk is summed (scalars resident); `--no-streamed` skips those rows. Each result is also printed as a
//! `PINION_BENCH {json}` line for `cargo xtask bench`.
//! Bases: 2^16 distinct random points tiled to n (the MSM's cost does not depend on
//! whether bases repeat). Scalars: uniform below r (random words, top word reduced).

use pinion_bench::{BenchLine, PeerRuns};
use std::time::Instant;

const GIB: f64 = (1u64 << 30) as f64;

use bls12_381::{G1Affine, G1Projective};
use gpu_device::{Gpu, GpuConfig, VramPool};
use gpu_msm::{
    AccumulateKernel, DeviceBases, DeviceScalars, G1Curve, G2Curve, GpuCurve, GpuMsm, GpuMsmConfig,
    OnesScatter, PinnedBases, ReduceKernel, SortKind, TwoLevelParams,
};
use group::Curve;
use memory_budget::{Budget, Category};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// The reference library's G1 figure (ms, with the copy of the scalars) for `shape`
/// (`uniform` or `groth16`, peer-bench's names): this run's where `PINION_PEER_MSM_CSV` gave
/// them, else the (uniform only), recorded on an H200 and set beside a run on that
/// kind only (`recorded`: [`pinion_bench::recorded_reference_applies`]). None for G2 (no
/// reference figures).
fn reference_ms(
    curve: &str,
    log_n: u32,
    shape: &str,
    peer: Option<&PeerRuns>,
    recorded: bool,
) -> Option<f64> {
    if curve != "g1" {
        return None;
    }
    if let Some(p) = peer {
        return p.get(shape, log_n);
    }
    if shape != "uniform" || !recorded {
        return None;
    }
    // Issue 6's figures (H200, 2026-11-30).
    match log_n {
        16 => Some(7.2),
        18 => Some(20.2),
        20 => Some(21.9),
        22 => Some(54.2),
        24 => Some(161.0),
        26 => Some(568.0),
        _ => None,
    }
}

const R_TOP_WORD: u32 = 0x73ed_a753;

fn scalar_words(rng: &mut StdRng, n: usize, groth16_shape: bool) -> Vec<u32> {
    let mut w = vec![0u32; n * 8];
    for s in w.chunks_exact_mut(8) {
        let kind = if groth16_shape {
            rng.random_range(0..10u32)
        } else {
            9
        };
        match kind {
            0..=2 => {}
            3..=5 => s[0] = 1,
            _ => {
                for x in s.iter_mut() {
                    *x = rng.random();
                }
                s[7] %= R_TOP_WORD; // top word below r's: the value is below r
            }
        }
    }
    w
}

/// Scalars (8 words each) other than 0 and 1: the count the library plans its windows for.
fn windowed_terms(words: &[u32]) -> usize {
    words
        .chunks_exact(8)
        .filter(|s| s[1..].iter().any(|&w| w != 0) || s[0] > 1)
        .count()
}

fn median(mut v: Vec<f32>) -> f32 {
    v.sort_by(f32::total_cmp);
    v[v.len() / 2]
}

type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

struct Timing {
    with_copy_ms: f32,
    resident_ms: f32,
}

fn time_one<C: GpuCurve>(
    engine: &GpuMsm,
    bases: &DeviceBases<C>,
    words: &[u32],
    runs: usize,
) -> BenchResult<Timing> {
    time_msm(engine, words, runs, |scalars| {
        Ok(engine.msm_resident(bases, scalars)?)
    })
}

/// `msm` on `words` copied from pinned host memory each time, then again on the same
/// device scalars; medians of `runs` after two warm-ups.
fn time_msm<P: PartialEq>(
    engine: &GpuMsm,
    words: &[u32],
    runs: usize,
    msm: impl Fn(&DeviceScalars) -> BenchResult<P>,
) -> BenchResult<Timing> {
    let gpu = engine.gpu();
    let stream = gpu.stream();
    let host_budget = Budget::fixed(words.len() as u64 * 4);
    let reservation = host_budget.try_reserve(
        words.len() as u64 * 4,
        Category::PinnedPool,
        "bench scalars",
    )?;
    let mut pinned = gpu.alloc_pinned::<u32>(words.len(), reservation)?;
    pinned.as_mut_slice()?.copy_from_slice(words);
    let mut scalars = engine.upload_scalar_words(words)?;
    let start = gpu.timing_event()?;
    let end = gpu.timing_event()?;
    let mut with_copy = Vec::new();
    let mut resident = Vec::new();
    for i in 0..runs + 2 {
        start.record(stream)?;
        stream.memcpy_htod(pinned.host_slice(), scalars.words_mut().slice_mut())?;
        let r1 = msm(&scalars)?;
        end.record(stream)?;
        end.synchronize()?;
        let t1 = start.elapsed_ms(&end)?;
        start.record(stream)?;
        let r2 = msm(&scalars)?;
        end.record(stream)?;
        end.synchronize()?;
        let t2 = start.elapsed_ms(&end)?;
        if r1 != r2 {
            return Err("two runs on the same inputs disagree".into());
        }
        if i >= 2 {
            with_copy.push(t1);
            resident.push(t2);
        }
    }
    Ok(Timing {
        with_copy_ms: median(with_copy),
        resident_ms: median(resident),
    })
}

/// Window sizes tried by the optional sweep (`PINION_MSM_SWEEP=1`): only sizes whose top
/// window spans most of its bits (others put every top digit into a few buckets and run
/// 10-200x slower; see `GpuMsmPlan::default_window_bits`).
const SWEEP_WINDOWS: [u32; 3] = [8, 13, 16];

/// The sweep's windows: `PINION_MSM_SWEEP_WINDOWS` (comma-separated, e.g. `16,20`) or
/// [`SWEEP_WINDOWS`].
fn sweep_windows() -> BenchResult<Vec<u32>> {
    match std::env::var("PINION_MSM_SWEEP_WINDOWS") {
        Err(_) => Ok(SWEEP_WINDOWS.to_vec()),
        Ok(list) => list
            .split(',')
            .map(|c| {
                c.trim()
                    .parse::<u32>()
                    .map_err(|e| format!("PINION_MSM_SWEEP_WINDOWS: {c:?}: {e}").into())
            })
            .collect(),
    }
}

/// The choices named in `var` (comma-separated, as `name` prints them), or all of `all`.
fn sweep_list<T: Copy>(var: &str, all: &[T], name: impl Fn(&T) -> String) -> BenchResult<Vec<T>> {
    match std::env::var(var) {
        Err(_) => Ok(all.to_vec()),
        Ok(list) => list
            .split(',')
            .map(|want| {
                all.iter()
                    .find(|k| name(k) == want.trim())
                    .copied()
                    .ok_or_else(|| {
                        let names: Vec<String> = all.iter().map(&name).collect();
                        format!("{var}: {want:?} is not one of {}", names.join(", ")).into()
                    })
            })
            .collect(),
    }
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1")
}

/// Issue 18's G1 target: at most this fraction of the reference's time.
const G1_TARGET_RATIO: f64 = 0.8;

/// Issue 18's G2 target (uniform scalars, with the copy, on an H200): 1.5x faster than the
/// H200's figures when the issue was filed, as (log2 size, ms then, target in words).
const G2_TARGETS: [(u32, f64, &str); 2] = [
    (20, 54.95, "<= 36.63 ms (1.5x faster than 54.95, H200)"),
    (24, 532.0, "<= 354.67 ms (1.5x faster than 532, H200)"),
];

/// One machine-readable result for `cargo xtask bench` (`PINION_BENCH {json}`); peer is the
/// reference's figure (which includes the scalar copy) and the target issue 18's ratio; for
/// G2's uniform rows with the copy at 2^20 and 2^24 on the H200 (`g2_target`), issue 18's
/// absolute target instead.
fn emit_bench_line(curve: &str, what: &str, log_n: u32, ms: f32, peer: Option<f64>) {
    emit_bench_line_with(curve, what, log_n, ms, peer, false)
}

fn emit_bench_line_with(
    curve: &str,
    what: &str,
    log_n: u32,
    ms: f32,
    peer: Option<f64>,
    g2_target: bool,
) {
    let ours = f64::from(ms);
    let (target, pass) = match G2_TARGETS.iter().find(|t| t.0 == log_n) {
        Some(&(_, then, words)) if g2_target => (Some(words), Some(ours * 1.5 <= then)),
        _ => (
            peer.map(|_| "<= 0.8x peer"),
            peer.map(|p| ours <= G1_TARGET_RATIO * p),
        ),
    };
    BenchLine {
        what: &format!("gpu msm {curve} {what}"),
        size: format!("2^{log_n}"),
        ours,
        peer,
        unit: "ms",
        lower_is_better: true,
        target,
        pass,
    }
    .emit();
}

/// Median device time of `runs` MSMs with the scalars resident (one warm-up first).
fn time_resident<C: GpuCurve>(
    engine: &GpuMsm,
    bases: &DeviceBases<C>,
    scalars: &DeviceScalars,
    runs: usize,
) -> BenchResult<f32> {
    let gpu = engine.gpu();
    let stream = gpu.stream();
    let start = gpu.timing_event()?;
    let end = gpu.timing_event()?;
    engine.msm_resident(bases, scalars)?;
    let mut v = Vec::new();
    for _ in 0..runs {
        start.record(stream)?;
        engine.msm_resident(bases, scalars)?;
        end.record(stream)?;
        end.synchronize()?;
        v.push(start.elapsed_ms(&end)?);
    }
    Ok(median(v))
}

/// Median device time of `runs` MSMs with the bases streamed from pinned host memory in
/// chunks of `chunk_len` (scalars resident; one warm-up first), checked against the
/// resident result.
fn time_streamed<C: GpuCurve>(
    engine: &GpuMsm,
    bases: &[C::Repr],
    resident_bases: &DeviceBases<C>,
    scalars: &DeviceScalars,
    chunk_len: usize,
    runs: usize,
) -> BenchResult<f32> {
    let gpu = engine.gpu();
    let n_words = bases.len() * C::AFFINE_WORDS;
    let bytes = n_words as u64 * 4;
    let host_budget = Budget::fixed(bytes);
    let reservation = host_budget.try_reserve(bytes, Category::PinnedPool, "bench bases")?;
    let mut pinned = PinnedBases::<C>::from_words(gpu.alloc_pinned::<u32>(n_words, reservation)?)?;
    pinned.reprs_mut()?.copy_from_slice(bases);
    let resident = engine.msm_resident(resident_bases, scalars)?;
    if engine.msm_streamed(&pinned, scalars, chunk_len)? != resident {
        return Err("streamed and resident results disagree".into());
    }
    let stream = gpu.stream();
    let start = gpu.timing_event()?;
    let end = gpu.timing_event()?;
    let mut v = Vec::new();
    for _ in 0..runs {
        start.record(stream)?;
        engine.msm_streamed(&pinned, scalars, chunk_len)?;
        end.record(stream)?;
        end.synchronize()?;
        v.push(start.elapsed_ms(&end)?);
    }
    Ok(median(v))
}

/// Command line: `--curves g1,g2` and log2 sizes.
struct Args {
    curves: Vec<String>,
    logs: Vec<u32>,
    streamed: bool,
}

fn parse_args() -> BenchResult<Args> {
    let mut curves = vec!["g1".to_owned(), "g2".to_owned()];
    let mut logs = Vec::new();
    let mut streamed = true;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        if a == "--no-streamed" {
            streamed = false;
        } else if a == "--curves" {
            let list = it.next().ok_or("--curves needs a list, e.g. g1,g2")?;
            curves = list.split(',').map(str::to_owned).collect();
            if let Some(bad) = curves.iter().find(|c| *c != "g1" && *c != "g2") {
                return Err(format!("unknown curve {bad:?} (g1, g2)").into());
            }
        } else {
            let log: u32 = a.parse().map_err(|_| format!("bad argument {a:?}"))?;
            if !(1..=28).contains(&log) {
                return Err(format!("size 2^{log} outside 2^1..=2^28").into());
            }
            logs.push(log);
        }
    }
    Ok(Args {
        curves,
        logs,
        streamed,
    })
}

/// Settings shared by every curve's rows.
struct Run {
    gpu: Gpu,
    /// `PINION_MSM_SORT=auto|counting|two-level` (default auto, the library's): how every
    /// timed engine sorts (unless counting, its sums checked against the counting sort's
    /// once a size).
    sort: SortKind,
    /// `PINION_MSM_TWO_LEVEL=chunk_log,bin_entries_log,place_bins[,staged][,sort=KIB]`: the
    /// two-level sort's sizes.
    two_level: TwoLevelParams,
    /// Whether the recorded reference figures apply to this device's kind.
    recorded: bool,
    /// The reference's figures from this run (`PINION_PEER_MSM_CSV`).
    peer: Option<PeerRuns>,
    runs: usize,
    sweep_on: bool,
    sweep_windows: Vec<u32>,
    sweep_kernels: Vec<AccumulateKernel>,
    sweep_chunks: Vec<u32>,
    sweep_reduce: Vec<ReduceKernel>,
    sweep_scatter: Vec<Option<u32>>,
    streamed: bool,
    stream_chunk_log: u32,
    rng: StdRng,
    rows: Vec<String>,
    phase_lines: Vec<String>,
}

/// `chunk_log,bin_entries_log,place_bins` followed by any of `staged` and `sort=KIB`.
fn parse_two_level(v: &str) -> Option<TwoLevelParams> {
    let parts: Vec<&str> = v.split(',').map(str::trim).collect();
    let num = |i: usize| parts.get(i)?.parse::<u32>().ok();
    let mut p = TwoLevelParams {
        chunk_log: num(0)?,
        bin_entries_log: num(1)?,
        place_bins: num(2)?,
        // Unstaged unless named (the default's is staged).
        staged: false,
        ..TwoLevelParams::default()
    };
    for extra in parts.iter().skip(3) {
        match *extra {
            "staged" => p.staged = true,
            _ => p.sort_shared_kib = extra.strip_prefix("sort=")?.parse().ok()?,
        }
    }
    Some(p)
}

fn main() -> BenchResult<()> {
    let args = parse_args()?;
    let runs: usize = std::env::var("PINION_BENCH_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let pool = match std::env::var("PINION_VRAM_POOL").as_deref() {
        Err(_) | Ok("keep") => VramPool::KEEP,
        Ok("driver") => VramPool::DRIVER,
        Ok(other) => {
            return Err(format!("PINION_VRAM_POOL: {other:?} is not driver or keep").into())
        }
    };
    let gpu = Gpu::open_with(
        0,
        GpuConfig {
            pool,
            ..GpuConfig::default()
        },
    )?;
    println!(
        "device: {} ({} SMs), device memory pool {pool:?}",
        gpu.info().name,
        gpu.info().sm_count
    );
    let recorded = pinion_bench::recorded_reference_applies(&gpu.info().name);
    let peer = PeerRuns::from_env("PINION_PEER_MSM_CSV")?;
    if peer.is_some() {
        println!("reference: this run's (PINION_PEER_MSM_CSV)");
    } else if !recorded {
        println!(
            "the reference figures were recorded on an {}: no ratios or targets on this device",
            pinion_bench::RECORDED_REFERENCE_KIND
        );
    }
    let sort = match std::env::var("PINION_MSM_SORT").as_deref() {
        Err(_) | Ok("auto") => SortKind::Auto,
        Ok("counting") => SortKind::Counting,
        Ok("two-level") => SortKind::TwoLevel,
        Ok(other) => {
            return Err(
                format!("PINION_MSM_SORT: {other:?} is not auto, counting or two-level").into(),
            )
        }
    };
    let two_level = match std::env::var("PINION_MSM_TWO_LEVEL") {
        Err(_) => TwoLevelParams::default(),
        Ok(v) => parse_two_level(&v).ok_or_else(|| {
            format!(
                "PINION_MSM_TWO_LEVEL: {v:?} is not chunk_log,bin_entries_log,place_bins[,staged][,sort=KIB]"
            )
        })?,
    };
    if sort != SortKind::Counting {
        println!("sort {sort:?}, two-level sizes: {two_level:?}");
    }
    let mut run = Run {
        gpu,
        sort,
        two_level,
        recorded,
        peer,
        runs,
        sweep_on: env_flag("PINION_MSM_SWEEP"),
        sweep_windows: sweep_windows()?,
        sweep_kernels: sweep_list("PINION_MSM_SWEEP_KERNELS", &AccumulateKernel::ALL, |k| {
            format!("{k:?}")
        })?,
        sweep_chunks: match std::env::var("PINION_MSM_SWEEP_CHUNKS") {
            Err(_) => vec![256],
            Ok(list) => list
                .split(',')
                .map(|c| c.trim().parse::<u32>())
                .collect::<Result<_, _>>()
                .map_err(|e| format!("PINION_MSM_SWEEP_CHUNKS: {e}"))?,
        },
        sweep_reduce: sweep_list(
            "PINION_MSM_SWEEP_REDUCE",
            &[ReduceKernel::Uncapped, ReduceKernel::Capped],
            |k| format!("{k:?}"),
        )?,
        sweep_scatter: match std::env::var("PINION_MSM_SWEEP_SCATTER") {
            Err(_) => vec![None],
            Ok(list) => list
                .split(',')
                .map(|c| c.trim().parse::<u32>().map(Some))
                .collect::<Result<_, _>>()
                .map_err(|e| format!("PINION_MSM_SWEEP_SCATTER: {e}"))?,
        },
        streamed: args.streamed,
        stream_chunk_log: std::env::var("PINION_MSM_STREAM_CHUNK_LOG")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(22),
        rng: StdRng::seed_from_u64(0x5eed),
        rows: Vec::new(),
        phase_lines: Vec::new(),
    };
    for curve in &args.curves {
        let logs = if !args.logs.is_empty() {
            args.logs.clone()
        } else {
            match (curve.as_str(), pinion_bench::quick()) {
                ("g1", true) => vec![16, 18],
                ("g1", false) => vec![16, 18, 20, 22, 24],
                (_, true) => vec![16],
                (_, false) => vec![20, 24],
            }
        };
        if curve == "g1" {
            bench_curve::<G1Curve>(&mut run, &logs)?;
            if std::env::var("PINION_MSM_PRECOMPUTED").as_deref() != Ok("0") {
                bench_precomputed(&mut run, &logs)?;
            }
        } else {
            bench_curve::<G2Curve>(&mut run, &logs)?;
        }
    }
    println!();
    for l in &run.phase_lines {
        println!("{l}");
    }
    let local = run.gpu.local_memory();
    if local.per_thread_bytes > 0 {
        println!(
            "kernel local memory: {} B a thread, charged {:.3} GiB, cuMemGetInfo's free fell {:.3} GiB when it was reserved",
            local.per_thread_bytes,
            local.charged_bytes as f64 / GIB,
            local.measured_bytes as f64 / GIB
        );
    }
    println!();
    println!("median of {runs} after warm-up, CUDA events; reference: issue 6 (same H200 kind, G1, with the copy)");
    println!("| curve | n | window, kernel | ours, with scalar copy (ms) | ours, scalars resident (ms) | reference (ms) | ours/ref |");
    println!("|---|---|---|---:|---:|---:|---:|");
    for r in &run.rows {
        println!("{r}");
    }
    Ok(())
}

/// Up to 2^16 distinct random points for `n` bases (tiled by the caller): running sums
/// of a few random points, cheap to make.
fn point_pool<P: Curve>(rng: &mut StdRng, n: usize) -> Vec<P::Affine> {
    let distinct = (1usize << 16).min(n).max(1);
    let seeds: Vec<P> = (0..8).map(|_| P::random(&mut *rng)).collect();
    let mut acc = P::random(&mut *rng);
    let proj: Vec<P> = (0..distinct)
        .map(|_| {
            acc += seeds[rng.random_range(0..seeds.len())];
            acc
        })
        .collect();
    let mut pool = vec![P::identity().to_affine(); distinct];
    P::batch_normalize(&proj, &mut pool);
    pool
}

/// Every size of one curve, then the Groth16-shaped row at the largest size.
fn bench_curve<C: GpuCurve>(run: &mut Run, logs: &[u32]) -> BenchResult<()>
where
    C::Projective: Curve<Affine = C::Affine>,
{
    let name = C::NAME;
    let gpu = run.gpu.clone();
    let rng = &mut run.rng;
    let max_n = 1usize << logs.iter().max().copied().unwrap_or(16);
    let t = Instant::now();
    let pool: Vec<C::Repr> = point_pool::<C::Projective>(rng, max_n)
        .iter()
        .map(C::to_repr)
        .collect();
    let all_bases: Vec<C::Repr> = (0..max_n).map(|i| pool[i % pool.len()]).collect();
    eprintln!("{name} setup {:.1} s", t.elapsed().as_secs_f64());

    // Warm-up at the largest size: module load, clocks, memory pool.
    {
        let engine = GpuMsm::new(gpu.clone());
        let bases = engine.upload_bases_repr::<C>(&all_bases)?;
        let scalars = engine.upload_scalar_words(&scalar_words(rng, max_n, false))?;
        for _ in 0..2 {
            engine.msm_resident(&bases, &scalars)?;
        }
    }

    let mut last = None;
    for &log_n in logs {
        let n = 1usize << log_n;
        let bases = GpuMsm::new(gpu.clone()).upload_bases_repr::<C>(&all_bases[..n])?;
        let words = scalar_words(rng, n, false);
        // Optional sweep of window size and accumulation kernel (scalars resident, 3 runs
        // each); without it the library's defaults are timed.
        let d_scalars = GpuMsm::new(gpu.clone()).upload_scalar_words(&words)?;
        let mut best: Option<(f32, GpuMsmConfig)> = None;
        let mut sweep = Vec::new();
        let windows: &[u32] = if run.sweep_on {
            &run.sweep_windows
        } else {
            &[]
        };
        for &c in windows {
            for &accumulate in &run.sweep_kernels {
                if accumulate.resolve::<C>() != accumulate {
                    continue; // a variant this curve does not have
                }
                let chunked = accumulate.is_chunked();
                let chunk_lens: &[u32] = if chunked { &run.sweep_chunks } else { &[0] };
                for &chunk_len in chunk_lens {
                    for (&reduce, &scatter_windows) in run
                        .sweep_reduce
                        .iter()
                        .flat_map(|r| run.sweep_scatter.iter().map(move |s| (r, s)))
                    {
                        let config = GpuMsmConfig {
                            window_bits: Some(c),
                            accumulate,
                            reduce,
                            chunk_len: chunked.then_some(chunk_len),
                            scatter_windows,
                            shared_scatter_keys: None,
                            shared_scatter_ones: OnesScatter::default(),
                            sort: run.sort,
                            two_level: run.two_level,
                        };
                        let engine = GpuMsm::with_config(gpu.clone(), config)?;
                        let ms = time_resident(&engine, &bases, &d_scalars, 3)?;
                        let chunk = if chunked {
                            format!("/L{chunk_len}")
                        } else {
                            String::new()
                        };
                        let scatter = scatter_windows.map_or(String::new(), |w| format!("/S{w}"));
                        sweep.push(format!(
                            "c{c}/{accumulate:?}{chunk}/{reduce:?}{scatter} {ms:.2}"
                        ));
                        if best.is_none_or(|(b, _)| ms < b) {
                            best = Some((ms, config));
                        }
                    }
                }
            }
        }
        if run.sweep_on {
            println!("sweep {name} 2^{log_n} (ms): {}", sweep.join(", "));
        }
        let config = best.map_or_else(
            || GpuMsmConfig {
                sort: run.sort,
                two_level: run.two_level,
                ..GpuMsmConfig::default()
            },
            |(_, c)| c,
        );
        let engine = GpuMsm::with_config(gpu.clone(), config)?;
        if run.sort != SortKind::Counting {
            let counting = GpuMsmConfig {
                sort: SortKind::Counting,
                ..GpuMsmConfig::default()
            };
            let want =
                GpuMsm::with_config(gpu.clone(), counting)?.msm_resident(&bases, &d_scalars)?;
            if engine.msm_resident(&bases, &d_scalars)? != want {
                return Err(format!("{name} 2^{log_n}: {:?} sort, wrong sum", run.sort).into());
            }
        }
        let timing = time_one(&engine, &bases, &words, run.runs)?;
        let r = reference_ms(name, log_n, "uniform", run.peer.as_ref(), run.recorded);
        run.rows.push(format!(
            "| {name} | 2^{log_n} | {} {:?} {:?} | {:.2} | {:.2} | {} | {} |",
            engine.plan(n).window_bits,
            engine.accumulate_kernel::<C>(n),
            config.reduce.resolve::<C>(),
            timing.with_copy_ms,
            timing.resident_ms,
            r.map_or("-".into(), |r| format!("{r:.1}")),
            r.map_or("-".into(), |r| format!(
                "{:.2}",
                timing.with_copy_ms as f64 / r
            )),
        ));
        println!("{}", run.rows.last().map_or("", String::as_str));
        let uniform = "uniform, with scalar copy";
        let g2_target = name == "g2" && run.recorded;
        emit_bench_line_with(name, uniform, log_n, timing.with_copy_ms, r, g2_target);
        let resident = "uniform, scalars resident";
        emit_bench_line(name, resident, log_n, timing.resident_ms, None);
        let (_, phases) = engine.msm_resident_profiled(&bases, &d_scalars)?;
        let label = format!("{name} 2^{log_n} uniform");
        run.phase_lines.push(phase_line(&label, &phases));
        if run.streamed && log_n >= 24 {
            let chunk_len = 1usize << run.stream_chunk_log.min(log_n);
            let ms = time_streamed::<C>(
                &engine,
                &all_bases[..n],
                &bases,
                &d_scalars,
                chunk_len,
                run.runs,
            )?;
            run.rows.push(format!(
                "| {name} | 2^{log_n} bases streamed from pinned (chunks of 2^{}) | {} {:?} | - | {ms:.2} | - | - |",
                run.stream_chunk_log.min(log_n),
                engine.plan(chunk_len).window_bits,
                engine.accumulate_kernel::<C>(chunk_len),
            ));
            println!("{}", run.rows.last().map_or("", String::as_str));
            let what = "uniform, bases streamed from pinned, scalars resident";
            emit_bench_line(name, what, log_n, ms, None);
        }
        last = Some((log_n, bases, engine));
    }
    if let Some((log_n, bases, engine)) = last {
        let n = 1usize << log_n;
        let g16 = scalar_words(rng, n, true);
        let t = time_one(&engine, &bases, &g16, run.runs)?;
        // Issue 6 recorded no Groth16-shaped figure: only this run's reference has one.
        let r = reference_ms(name, log_n, "groth16", run.peer.as_ref(), false);
        run.rows.push(format!(
            "| {name} | 2^{log_n} Groth16-shaped (30% 0, 30% 1) | {} {:?} | {:.2} | {:.2} | {} | {} |",
            engine.plan(windowed_terms(&g16)).window_bits,
            engine.accumulate_kernel::<C>(windowed_terms(&g16)),
            t.with_copy_ms,
            t.resident_ms,
            r.map_or("-".into(), |r| format!("{r:.1}")),
            r.map_or("-".into(), |r| format!("{:.2}", t.with_copy_ms as f64 / r)),
        ));
        println!("{}", run.rows.last().map_or("", String::as_str));
        let what = "groth16-shaped, with scalar copy";
        emit_bench_line(name, what, log_n, t.with_copy_ms, r);
        let scalars = engine.upload_scalar_words(&g16)?;
        let (_, phases) = engine.msm_resident_profiled(&bases, &scalars)?;
        let label = format!("{name} 2^{log_n} groth16-shaped");
        run.phase_lines.push(phase_line(&label, &phases));
        // Every scalar equal: one bucket per window holds all n entries. Only with a
        // chunked accumulation (one thread per bucket would add them one after another).
        let kernel = engine.accumulate_kernel::<C>(n);
        let skip_equal = std::env::var("PINION_MSM_NO_EQUAL").is_ok_and(|v| v == "1");
        if kernel.is_chunked() && !skip_equal {
            let one = scalar_words(rng, 1, false);
            let equal: Vec<u32> = (0..n).flat_map(|_| one.iter().copied()).collect();
            let t = time_one(&engine, &bases, &equal, run.runs)?;
            run.rows.push(format!(
                "| {name} | 2^{log_n} all scalars equal | {} {kernel:?} | {:.2} | {:.2} | - | - |",
                engine.plan(n).window_bits,
                t.with_copy_ms,
                t.resident_ms
            ));
            println!("{}", run.rows.last().map_or("", String::as_str));
            emit_bench_line(
                name,
                "all scalars equal, with scalar copy",
                log_n,
                t.with_copy_ms,
                None,
            );
        }
    }
    Ok(())
}

/// G1 over precomputed windows (one shared set of buckets), uniform scalars, at the sizes
/// up to 2^24 (the tables of larger ones hold W times 6 GiB and more): for each window of
/// `PINION_MSM_PRECOMPUTED_WINDOWS` (default 16, 20, 22) the table's build time and size,
/// then the MSM timed as the resident rows are, its result checked against the resident
/// pipeline's. `PINION_MSM_PRECOMPUTED=0` skips these rows.
fn bench_precomputed(run: &mut Run, logs: &[u32]) -> BenchResult<()> {
    let windows: Vec<u32> = match std::env::var("PINION_MSM_PRECOMPUTED_WINDOWS") {
        Err(_) => vec![16, 20, 22],
        Ok(list) => list
            .split(',')
            .map(|c| c.trim().parse::<u32>())
            .collect::<Result<_, _>>()
            .map_err(|e| format!("PINION_MSM_PRECOMPUTED_WINDOWS: {e}"))?,
    };
    // Keys a shared-bucket scatter launch writes (log2; `all`: one launch; unset: the
    // library's default), a suffix `s`, `w` or `a` splitting the ones with the digits',
    // putting them into the digits' last launch or alone into one (none: the default).
    let splits: Vec<(Option<u32>, Option<OnesScatter>)> =
        match std::env::var("PINION_MSM_SHARED_SCATTER") {
            Err(_) => vec![(None, None)],
            Ok(list) => list
                .split(',')
                .map(|k| {
                    let k = k.trim();
                    let ones = match k.as_bytes().last() {
                        Some(b's') => Some(OnesScatter::Split),
                        Some(b'w') => Some(OnesScatter::WithLast),
                        Some(b'a') => Some(OnesScatter::Alone),
                        _ => None,
                    };
                    let k = if ones.is_some() { &k[..k.len() - 1] } else { k };
                    match k {
                        "all" => Ok((Some(u32::MAX), ones)),
                        "" => Ok((None, ones)),
                        k => match k.parse::<u32>() {
                            Ok(log) if log < 32 => Ok((Some(1u32 << log), ones)),
                            _ => Err(format!(
                                "PINION_MSM_SHARED_SCATTER: {k:?} is not all or a log2 below 32 \
                                 (with an optional s, w or a)"
                            )),
                        },
                    }
                })
                .collect::<Result<_, _>>()?,
        };
    // Entries a thread of the accumulation takes (unset: the library's default).
    let chunks: Vec<Option<u32>> = match std::env::var("PINION_MSM_PRECOMPUTED_CHUNKS") {
        Err(_) => vec![None],
        Ok(list) => list
            .split(',')
            .map(|k| {
                k.trim().parse::<u32>().map(Some).map_err(|e| {
                    format!("PINION_MSM_PRECOMPUTED_CHUNKS: {k:?} is not a chunk length: {e}")
                })
            })
            .collect::<Result<_, _>>()?,
    };
    // Scalar shapes: uniform (default) and Groth16's (30% zeros, 30% ones).
    let shapes: Vec<bool> = match std::env::var("PINION_MSM_PRECOMPUTED_SHAPES") {
        Err(_) => vec![false],
        Ok(list) => list
            .split(',')
            .map(|k| match k.trim() {
                "uniform" => Ok(false),
                "groth16" => Ok(true),
                k => Err(format!(
                    "PINION_MSM_PRECOMPUTED_SHAPES: {k:?} is not uniform or groth16"
                )),
            })
            .collect::<Result<_, _>>()?,
    };
    let gpu = run.gpu.clone();
    for &log_n in logs.iter().filter(|&&l| l <= 24) {
        let n = 1usize << log_n;
        let engine = GpuMsm::new(gpu.clone());
        let pool = point_pool::<G1Projective>(&mut run.rng, n);
        let bases: Vec<G1Affine> = (0..n).map(|i| pool[i % pool.len()]).collect();
        let d_bases = engine.upload_bases_g1(&bases)?;
        let mut inputs = Vec::new();
        for &groth16 in &shapes {
            let words = scalar_words(&mut run.rng, n, groth16);
            let d_scalars = engine.upload_scalar_words(&words)?;
            let want = engine.msm_resident(&d_bases, &d_scalars)?;
            inputs.push((groth16, words, d_scalars, want));
        }
        for &c in &windows {
            let t = Instant::now();
            let table = engine.precompute_windows_g1(&d_bases.view(), c)?;
            let build_ms = t.elapsed().as_secs_f64() * 1e3;
            for (groth16, words, d_scalars, want) in &inputs {
                let shape = if *groth16 {
                    "Groth16-shaped"
                } else {
                    "uniform"
                };
                for (&(split, ones), &chunk_len) in splits
                    .iter()
                    .flat_map(|s| chunks.iter().map(move |c| (s, c)))
                {
                    let engine = GpuMsm::with_config(
                        gpu.clone(),
                        GpuMsmConfig {
                            shared_scatter_keys: split,
                            shared_scatter_ones: ones.unwrap_or_default(),
                            chunk_len,
                            ..GpuMsmConfig::default()
                        },
                    )?;
                    let ones_label = ones.map(|o| match o {
                        OnesScatter::Split => "ones split with the digits",
                        OnesScatter::WithLast => "ones with the last",
                        OnesScatter::Alone => "ones alone",
                    });
                    let split_label = match split {
                        None => None,
                        Some(u32::MAX) => Some("scatter in one launch".to_string()),
                        Some(k) => Some(format!("scatter 2^{} keys a launch", k.trailing_zeros())),
                    };
                    let notes: Vec<String> = split_label
                        .into_iter()
                        .chain(ones_label.map(String::from))
                        .chain(chunk_len.map(|c| format!("chunks of {c}")))
                        .collect();
                    let c_label = if notes.is_empty() {
                        format!("{c}")
                    } else {
                        format!("{c} ({})", notes.join(", "))
                    };
                    if engine.msm_g1_precomputed(&table, d_scalars)? != *want {
                        return Err(format!(
                            "precomputed windows c = {c_label} at 2^{log_n}, {shape}: wrong sum"
                        )
                        .into());
                    }
                    let timing = time_msm(&engine, words, run.runs, |scalars| {
                        Ok(engine.msm_g1_precomputed(&table, scalars)?)
                    })?;
                    let peer_shape = if *groth16 { "groth16" } else { "uniform" };
                    let r = reference_ms("g1", log_n, peer_shape, run.peer.as_ref(), run.recorded);
                    run.rows.push(format!(
                        "| g1 | 2^{log_n} {shape}, precomputed windows ({} rows, {:.2} GiB, built in {build_ms:.0} ms) | {c_label} shared buckets | {:.2} | {:.2} | {} | {} |",
                        table.n_windows(),
                        table.device_bytes() as f64 / GIB,
                        timing.with_copy_ms,
                        timing.resident_ms,
                        r.map_or("-".into(), |r| format!("{r:.1}")),
                        r.map_or("-".into(), |r| format!("{:.2}", timing.with_copy_ms as f64 / r)),
                    ));
                    println!("{}", run.rows.last().map_or("", String::as_str));
                    let what =
                        format!("{shape}, precomputed windows c = {c_label}, with scalar copy");
                    emit_bench_line("g1", &what, log_n, timing.with_copy_ms, None);
                    let (_, phases) = engine.msm_g1_precomputed_profiled(&table, d_scalars)?;
                    let label = format!("g1 2^{log_n} {shape}, precomputed windows c = {c_label}");
                    run.phase_lines.push(phase_line(&label, &phases));
                }
            }
        }
    }
    Ok(())
}

fn phase_line(label: &str, phases: &[(&'static str, f32)]) -> String {
    let total: f32 = phases.iter().map(|p| p.1).sum();
    let parts: Vec<String> = phases
        .iter()
        .map(|(name, ms)| format!("{name} {ms:.2}"))
        .collect();
    format!(
        "phases {label} (ms, total {total:.2}): {}",
        parts.join(", ")
    )
}
