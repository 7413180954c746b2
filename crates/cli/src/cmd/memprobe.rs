//! `pinion memprobe`: what bounds this process's memory (memory-budget's detection), each
//! GPU's VRAM, and with `--probe` where allocation really stops, found by a child process
//! so that the parent survives the OOM killer.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use anyhow::Context;
use memory_budget::{format_bytes, parse_bytes, Budget, Category, MemoryReport};
use serde_json::{json, Value};

use crate::ui;
use crate::Outcome;

/// Arguments of `pinion memprobe`.
pub struct MemprobeArgs<'a> {
    pub json: bool,
    pub probe: bool,
    pub step: &'a str,
    pub budget: Option<&'a str>,
}

/// Each GPU's VRAM, or why there is none.
fn gpus() -> Value {
    if !gpu_device::driver_present() {
        return json!({ "status": "no CUDA driver", "devices": [] });
    }
    match gpu_device::Gpu::open_all() {
        Err(e) => json!({ "status": format!("cannot open devices: {e}"), "devices": [] }),
        Ok(gpus) => {
            let devices: Vec<Value> = gpus
                .iter()
                .map(|g| {
                    let info = g.info();
                    let mem = g.mem_info().ok();
                    json!({
                        "ordinal": info.ordinal,
                        "name": info.name,
                        "compute_capability": format!("{}.{}", info.compute_capability.0, info.compute_capability.1),
                        "vram_total_bytes": info.total_memory_bytes,
                        "vram_free_bytes": mem.map(|m| m.free_bytes),
                        "vram_budget_bytes": g.vram_budget().total_bytes(),
                    })
                })
                .collect();
            json!({ "status": format!("{} device(s)", devices.len()), "devices": devices })
        }
    }
}

/// What the child reported for one kind of memory.
#[derive(Debug, Default)]
struct ProbeResult {
    reached_bytes: u64,
    stopped: Option<String>,
}

/// Runs the probe child and reads its report; the parent survives whatever happens.
fn probe(max_bytes: u64, step_bytes: u64) -> anyhow::Result<Value> {
    let exe = std::env::current_exe().context("cannot find this program to re-run it")?;
    let mut child = Command::new(exe)
        .args([
            "probe-child",
            "--max-bytes",
            &max_bytes.to_string(),
            "--step-bytes",
            &step_bytes.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("cannot start the probe child")?;
    let mut results: [ProbeResult; 2] = Default::default();
    let mut current = 0usize;
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let mut parts = line.splitn(3, ' ');
            let (kind, event, rest) = (
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
                parts.next().unwrap_or(""),
            );
            let idx = usize::from(kind == "pinned");
            current = idx;
            match event {
                "ok" => {
                    results[idx].reached_bytes = rest.parse().unwrap_or(results[idx].reached_bytes);
                    ui::note(format!(
                        "probe: {kind} {} allocated and touched",
                        format_bytes(results[idx].reached_bytes)
                    ));
                }
                "stop" => results[idx].stopped = Some(rest.to_string()),
                _ => {}
            }
        }
    }
    let status = child.wait().context("cannot wait for the probe child")?;
    if !status.success() {
        let why = {
            use std::os::unix::process::ExitStatusExt;
            match status.signal() {
                Some(9) => "the child was killed by SIGKILL (most likely the kernel's OOM killer: the machine or container allows less than the budget)".to_string(),
                Some(sig) => format!("the child died from signal {sig}"),
                None => format!("the child exited with status {}", status.code().unwrap_or(-1)),
            }
        };
        let r = &mut results[current];
        if r.stopped.is_none() {
            r.stopped = Some(format!(
                "{why}, after {} had been touched",
                format_bytes(r.reached_bytes)
            ));
        }
    }
    let item = |r: &ProbeResult| {
        json!({
            "reached_bytes": r.reached_bytes,
            "stopped": r.stopped.clone().unwrap_or_else(|| "the child ended without a report".into()),
        })
    };
    Ok(json!({
        "max_bytes": max_bytes,
        "step_bytes": step_bytes,
        "pageable": item(&results[0]),
        "pinned": item(&results[1]),
    }))
}

/// The probe child: allocate and touch pageable memory step by step up to `max_bytes`,
/// free it, then the same with pinned memory when a GPU driver is present. One line per
/// event on stdout (`<kind> ok <bytes>` / `<kind> stop <reason>`), flushed at once so the
/// parent knows how far it got even if this process is killed.
pub fn child(max_bytes: u64, step_bytes: u64) -> anyhow::Result<Outcome> {
    let step = step_bytes.max(1);
    let mut out = std::io::stdout().lock();
    let mut say = |line: String| {
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut reached = 0u64;
    let reason = loop {
        if reached >= max_bytes {
            break "reached the budget".to_string();
        }
        let n = step.min(max_bytes - reached);
        let Ok(n_usize) = usize::try_from(n) else {
            break "step does not fit in memory addresses".to_string();
        };
        let mut v: Vec<u8> = Vec::new();
        if v.try_reserve_exact(n_usize).is_err() {
            break format!("the allocator refused {} more", format_bytes(n));
        }
        // Writing every byte makes the kernel back every page (a reservation alone may be
        // overcommitted and never charged).
        v.resize(n_usize, 0xa5);
        held.push(v);
        reached += n;
        say(format!("pageable ok {reached}"));
        test_kill_hook(reached);
    };
    say(format!("pageable stop {reason}"));
    drop(held);

    if !gpu_device::driver_present() {
        say("pinned stop skipped: no CUDA driver (pinned memory comes from the driver)".into());
        return Ok(Outcome::Success);
    }
    let gpu = match gpu_device::Gpu::open(0) {
        Ok(g) => g,
        Err(e) => {
            say(format!("pinned stop skipped: cannot open gpu 0: {e}"));
            return Ok(Outcome::Success);
        }
    };
    // Pinned buffers are paid for by host reservations; this budget only counts the probe.
    let budget = Budget::fixed(max_bytes.max(1));
    let mut pinned = Vec::new();
    let mut reached = 0u64;
    let reason = loop {
        if reached >= max_bytes {
            break "reached the budget".to_string();
        }
        let n = step.min(max_bytes - reached);
        let r = match budget.try_reserve(n, Category::PinnedPool, "memprobe") {
            Ok(r) => r,
            Err(e) => break format!("budget: {e}"),
        };
        match gpu.alloc_pinned::<u8>(n as usize, r) {
            Ok(b) => pinned.push(b),
            Err(e) => break format!("the driver refused {} more: {e}", format_bytes(n)),
        }
        reached += n;
        say(format!("pinned ok {reached}"));
    };
    say(format!("pinned stop {reason}"));
    Ok(Outcome::Success)
}

/// Tests make the child die the way the OOM killer kills it (SIGKILL) once it has touched
/// `PINION_TEST_PROBE_KILL_AFTER_BYTES`, to check that the parent survives and reports it.
fn test_kill_hook(reached: u64) {
    let limit = std::env::var("PINION_TEST_PROBE_KILL_AFTER_BYTES")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    if limit.is_some_and(|l| reached >= l) {
        let _ = Command::new("kill")
            .args(["-KILL", &std::process::id().to_string()])
            .status();
        // The signal is asynchronous: wait for it rather than report more steps.
        std::thread::sleep(std::time::Duration::from_secs(10));
    }
}

/// Prints the report: memory-budget's report, then each GPU's VRAM and the probe's result.
pub fn run(a: MemprobeArgs<'_>) -> anyhow::Result<Outcome> {
    let budget = super::host_budget(a.budget)?;
    let report =
        MemoryReport::of(&budget).context("the detected budget has no detection record")?;
    let vm_hwm = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .map(|kb| kb * 1024)
        });
    let gpus = gpus();
    let probe = if a.probe {
        let step = parse_bytes(a.step).context("bad --step")?;
        Some(probe(report.detection().budget_bytes, step)?)
    } else {
        None
    };
    if a.json {
        let mut out = report.to_json();
        out["vm_hwm_bytes"] = json!(vm_hwm);
        out["gpus"] = gpus;
        out["probe"] = json!(probe);
        super::print_json(&out);
        return Ok(Outcome::Success);
    }
    report
        .write_text(&mut std::io::stdout().lock())
        .context("cannot write the report")?;
    println!("gpus: {}", gpus["status"].as_str().unwrap_or("?"));
    for d in gpus["devices"].as_array().into_iter().flatten() {
        let b = |k: &str| d[k].as_u64().map_or_else(|| "?".into(), format_bytes);
        println!(
            "  gpu {} {} (sm {}): vram total {}, free {}, budget {}",
            d["ordinal"],
            d["name"].as_str().unwrap_or("?"),
            d["compute_capability"].as_str().unwrap_or("?"),
            b("vram_total_bytes"),
            b("vram_free_bytes"),
            b("vram_budget_bytes")
        );
    }
    if let Some(p) = &probe {
        println!(
            "probe (steps of {}, up to the budget {}):",
            format_bytes(p["step_bytes"].as_u64().unwrap_or(0)),
            format_bytes(p["max_bytes"].as_u64().unwrap_or(0))
        );
        for kind in ["pageable", "pinned"] {
            println!(
                "  {kind:<9} reached {}; stopped: {}",
                format_bytes(p[kind]["reached_bytes"].as_u64().unwrap_or(0)),
                p[kind]["stopped"].as_str().unwrap_or("?")
            );
        }
    }
    Ok(Outcome::Success)
}
