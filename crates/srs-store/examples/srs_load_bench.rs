//! Load benchmark: writes a parameter file of at least `--size-gib` (default 2) GiB of
//! valid, distinct points to a temp directory (never to git), warms the page cache, loads it
//! into host memory under a budget, and reports throughput and peak RSS (VmHWM) against the
//! targets: peak RSS <= 1.1 x loaded size + 256 MiB, and >= 1 GiB/s from page cache.
//!
//! `cargo run --release -p srs-store --example srs_load_bench -- [--size-gib F]
//!  [--dir PATH] [--check none|curve|full] [--chunk-mib N] [--runs N] [--keep]
//!  [--dest host|pinned|device]`
//!
//! `--dest pinned|device` needs a CUDA device (GPU 0); peak RSS is then compared with the
//! host-side loaded size (bases for pinned, the verifying key and one staging window for
//! device).
//!
//! `PINION_BENCH_QUICK=1` (`cargo xtask bench --quick`) defaults to a 0.25 GiB file and 2 runs;
//! `PINION_BENCH` lines carry the two targets' figures for `cargo xtask bench`.
//!
//! Points: section s, index i holds (k_s + i) * G for a per-section start k_s, computed by
//! repeated addition in parallel batches and batch-normalised: cheap, distinct and valid.

use pinion_bench::{quick, BenchLine};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::PathBuf;
use std::time::Instant;

use bls12_381::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use gpu_device::Gpu;
use group::Curve;
use memory_budget::Budget;
use rayon::prelude::*;
use srs_store::{Destination, LoadOptions, PageCache, ParamsFile, PointCheck};

const MIB: u64 = 1 << 20;
const GIB: f64 = (1u64 << 30) as f64;
/// Points generated per parallel batch.
const BATCH: usize = 1 << 15;

/// User + system CPU seconds of this process so far.
fn cpu_seconds() -> f64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes one `rusage` into the pointer we give it, which is valid and
    // sized for it; on failure it writes nothing and we read the zeroed value.
    let ru = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
        ru.assume_init()
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn proc_status_kib(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Resets VmHWM to the current RSS so generation does not count towards the load's peak.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Writes `n` G1 points (k + i) * G, i in 0..n, in parallel batches.
fn write_g1(w: &mut impl Write, k: u64, n: usize) -> std::io::Result<()> {
    w.write_all(&(n as u32).to_be_bytes())?;
    let g = G1Affine::generator();
    let chunk = BATCH * 32;
    let mut done = 0;
    while done < n {
        let m = chunk.min(n - done);
        let mut buf = vec![0u8; m * 96];
        buf.par_chunks_mut(BATCH * 96)
            .enumerate()
            .for_each(|(b, out)| {
                let start = k + (done + b * BATCH) as u64;
                let cnt = out.len() / 96;
                let mut p = G1Projective::generator() * Scalar::from(start);
                let mut proj = Vec::with_capacity(cnt);
                for _ in 0..cnt {
                    proj.push(p);
                    p += g;
                }
                let mut aff = vec![G1Affine::identity(); cnt];
                G1Projective::batch_normalize(&proj, &mut aff);
                for (o, a) in out.chunks_exact_mut(96).zip(&aff) {
                    o.copy_from_slice(&a.to_uncompressed());
                }
            });
        w.write_all(&buf)?;
        done += m;
    }
    Ok(())
}

fn write_g2(w: &mut impl Write, k: u64, n: usize) -> std::io::Result<()> {
    w.write_all(&(n as u32).to_be_bytes())?;
    let g = G2Affine::generator();
    let chunk = BATCH * 16;
    let mut done = 0;
    while done < n {
        let m = chunk.min(n - done);
        let mut buf = vec![0u8; m * 192];
        buf.par_chunks_mut(BATCH * 192)
            .enumerate()
            .for_each(|(b, out)| {
                let start = k + (done + b * BATCH) as u64;
                let cnt = out.len() / 192;
                let mut p = G2Projective::generator() * Scalar::from(start);
                let mut proj = Vec::with_capacity(cnt);
                for _ in 0..cnt {
                    proj.push(p);
                    p += g;
                }
                let mut aff = vec![G2Affine::identity(); cnt];
                G2Projective::batch_normalize(&proj, &mut aff);
                for (o, a) in out.chunks_exact_mut(192).zip(&aff) {
                    o.copy_from_slice(&a.to_uncompressed());
                }
            });
        w.write_all(&buf)?;
        done += m;
    }
    Ok(())
}

/// Sizes the sections like a real file (h, l, a, b_g1 of n points, b_g2 of n) so the total
/// reaches `target_bytes`.
fn generate(path: &PathBuf, target_bytes: u64) -> std::io::Result<u64> {
    let per_n = 4 * 96 + 192;
    let n = target_bytes.div_ceil(per_n) as usize;
    let mut w = BufWriter::with_capacity(8 << 20, File::create(path)?);
    let g1 = (G1Projective::generator() * Scalar::from(7u64)).to_affine();
    let g2 = (G2Projective::generator() * Scalar::from(11u64)).to_affine();
    for p in [g1, g1] {
        w.write_all(&p.to_uncompressed())?;
    }
    w.write_all(&g2.to_uncompressed())?;
    w.write_all(&g2.to_uncompressed())?;
    w.write_all(&g1.to_uncompressed())?;
    w.write_all(&g2.to_uncompressed())?;
    write_g1(&mut w, 1_000, 4)?; // ic
    for (s, k) in [1u64, 2, 3, 4].iter().enumerate() {
        let _ = s;
        write_g1(&mut w, k << 40, n)?;
    }
    write_g2(&mut w, 5 << 40, n)?;
    w.flush()?;
    Ok(std::fs::metadata(path)?.len())
}

fn warm_page_cache(path: &PathBuf) -> std::io::Result<()> {
    let mut f = File::open(path)?;
    let mut buf = vec![0u8; 8 << 20];
    while f.read(&mut buf)? > 0 {}
    Ok(())
}

fn main() {
    let mut size_gib = if quick() { 0.25 } else { 2.0f64 };
    let mut dir: Option<PathBuf> = None;
    let mut check = PointCheck::None;
    let mut chunk_mib = 64u64;
    let mut runs = if quick() { 2 } else { 3usize };
    let mut keep = false;
    let mut dest = "host".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--size-gib" => size_gib = val().parse().expect("number"),
            "--dir" => dir = Some(val().into()),
            "--check" => check = val().parse().expect("none|curve|full"),
            "--chunk-mib" => chunk_mib = val().parse().expect("number"),
            "--runs" => runs = val().parse().expect("number"),
            "--keep" => keep = true,
            "--dest" => dest = val(),
            other => panic!("unknown argument {other}"),
        }
    }
    let dir = dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("pinion-srs-bench-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir).expect("create dir");
    let path = dir.join(format!("bench-{size_gib}g.params"));
    let target = (size_gib * GIB) as u64;
    let reuse = std::fs::metadata(&path)
        .map(|m| m.len() >= target)
        .unwrap_or(false);
    if !reuse {
        let t = Instant::now();
        let bytes = generate(&path, target).expect("generate");
        eprintln!(
            "generated {} ({:.2} GiB) in {:.1} s",
            path.display(),
            bytes as f64 / GIB,
            t.elapsed().as_secs_f64()
        );
    }
    warm_page_cache(&path).expect("warm page cache");

    let file = ParamsFile::open(&path).expect("open");
    let destination = match dest.as_str() {
        "host" => Destination::Host,
        "pinned" => Destination::Pinned(Gpu::open(0).expect("open GPU 0")),
        "device" => Destination::Device(Gpu::open(0).expect("open GPU 0")),
        other => panic!("unknown destination {other}, expected host, pinned or device"),
    };
    let options = LoadOptions {
        check,
        chunk_bytes: chunk_mib * MIB,
        page_cache: PageCache::Keep,
        destination,
        ..LoadOptions::default()
    };
    let plan = file.plan(&options);
    let budget = Budget::fixed(plan.peak_bytes());
    let n_threads = rayon::current_num_threads();
    println!(
        "file {:.3} GiB, loaded size {:.3} GiB (host; {:.3} GiB device), charge peak {:.3} GiB, check {:?}, dest {dest}, chunk {} MiB, {} threads",
        file.layout().file_bytes() as f64 / GIB,
        plan.destination_bytes as f64 / GIB,
        plan.device_bytes as f64 / GIB,
        plan.peak_bytes() as f64 / GIB,
        check,
        chunk_mib,
        n_threads
    );
    let reset = reset_peak_rss();
    let base_rss_kib = proc_status_kib("VmRSS:").unwrap_or(0);
    let mut best = 0f64;
    let mut best_cpu = 0f64;
    for run in 0..runs {
        let cpu0 = cpu_seconds();
        let loaded = file.load(&budget, &options).expect("load");
        let cpu = cpu_seconds() - cpu0;
        let s = loaded.stats();
        let rate = s.bytes_per_second() / GIB;
        // What the load's CPU time would give with every core free (the box is shared).
        let cpu_rate = s.file_bytes as f64 / GIB / (cpu / n_threads as f64);
        best = best.max(rate);
        best_cpu = best_cpu.max(cpu_rate);
        println!(
            "run {run}: {:.3} s wall, {:.2} GiB/s; {:.2} cpu-s, {:.2} GiB/s if {} cores were free",
            s.seconds, rate, cpu, cpu_rate, n_threads
        );
        drop(loaded);
    }
    let hwm_kib = proc_status_kib("VmHWM:").unwrap_or(0);
    // The same stream with no destination: parse and checks only, no fresh memory to fault
    // in. The gap to the load rate is the cost of first-touching the destination pages.
    let t = Instant::now();
    file.check_points(check, &options).expect("check");
    let dt = t.elapsed().as_secs_f64();
    println!(
        "stream without destination (parse{} only): {:.3} s, {:.2} GiB/s",
        if check == PointCheck::None {
            ""
        } else {
            " + checks"
        },
        dt,
        file.layout().file_bytes() as f64 / GIB / dt
    );
    let loaded_mib = plan.destination_bytes as f64 / MIB as f64;
    let limit_mib = 1.1 * loaded_mib + 256.0;
    let hwm_mib = hwm_kib as f64 / 1024.0;
    println!(
        "peak RSS (VmHWM{}) {:.0} MiB (baseline RSS {:.0} MiB); target <= 1.1 x {:.0} + 256 = {:.0} MiB: {}",
        if reset { ", reset after generation" } else { ", NOT reset: includes generation" },
        hwm_mib,
        base_rss_kib as f64 / 1024.0,
        loaded_mib,
        limit_mib,
        if hwm_mib <= limit_mib { "met" } else { "MISSED" }
    );
    println!(
        "best cpu-bound rate {best_cpu:.2} GiB/s (load average now {})",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    println!(
        "best load rate {best:.2} GiB/s; target >= 1 GiB/s from page cache: {}",
        if best >= 1.0 { "met" } else { "MISSED" }
    );
    let size = format!(
        "{:.2} GiB, check {check:?}, dest {dest}",
        file.layout().file_bytes() as f64 / GIB
    );
    BenchLine {
        what: "srs load from page cache",
        size: size.clone(),
        ours: best,
        peer: None,
        unit: "GiB/s",
        lower_is_better: false,
        target: Some(">= 1 GiB/s"),
        pass: Some(best >= 1.0),
    }
    .emit();
    let limit_target = format!("<= 1.1x loaded + 256 MiB = {limit_mib:.0} MiB");
    BenchLine {
        what: "srs load peak RSS (VmHWM)",
        size,
        ours: hwm_mib,
        peer: None,
        unit: "MiB",
        lower_is_better: true,
        target: Some(&limit_target),
        pass: Some(hwm_mib <= limit_mib),
    }
    .emit();
    if !keep {
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_dir(&dir);
    }
}
