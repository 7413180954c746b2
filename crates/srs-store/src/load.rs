//! Opening a parameter file (header walk only) and streaming it into the `bls-repr` layout.
//!
//! The load charges its peak before the first byte is copied: the destination plus one
//! window of mapped file pages. Each window (`chunk_bytes` of file) is populated, converted
//! in parallel, then its pages are unmapped behind us (`MADV_DONTNEED`) and optionally
//! dropped from the page cache (`POSIX_FADV_DONTNEED`), so resident memory stays near the
//! destination size instead of destination + whole mapping.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Instant;

use std::marker::PhantomData;

use bls_repr::{G1AffineRepr, G2AffineRepr};
use gpu_device::{DeviceBuffer, Gpu, GpuError, PinnedBuffer};
use memmap2::{Advice, Mmap, UncheckedAdvice};
use memory_budget::{Budget, Category, Reservation};
use rayon::prelude::*;

use crate::error::{Result, SrsError};
use crate::layout::{ExpectedSizes, ParamsLayout, Section, SectionSpan, VK_FIXED};

/// How much of each point to check while loading. Points at infinity are always rejected
/// (the reference reader rejects them too), and encodings are always parsed strictly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PointCheck {
    /// Encoding only: flag bits and coordinates below p.
    None,
    /// Encoding and curve equation (the default: a few field multiplications per point,
    /// in parallel; a flipped byte in a base is caught at load, not as a bad proof).
    #[default]
    Curve,
    /// Encoding, curve equation and prime-order subgroup (the expensive one).
    Full,
}

impl FromStr for PointCheck {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "none" => Ok(PointCheck::None),
            "curve" => Ok(PointCheck::Curve),
            "full" => Ok(PointCheck::Full),
            other => Err(format!(
                "unknown check {other:?}, expected none, curve or full"
            )),
        }
    }
}

/// What to do with the file's page-cache pages once a window is converted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PageCache {
    /// Leave them cached (a later reload is fast; the kernel reclaims them under pressure).
    #[default]
    Keep,
    /// Ask the kernel to drop them (`POSIX_FADV_DONTNEED`): the loaded copy is the only one.
    Drop,
}

/// Where the loaded bases live.
#[derive(Clone, Debug, Default)]
pub enum Destination {
    /// Ordinary (pageable) host memory.
    #[default]
    Host,
    /// Page-locked host memory from `gpu-device` (portable, not write-combined), paid for
    /// by the load's host reservation.
    Pinned(Gpu),
    /// Device memory charged to the GPU's VRAM budget; the host holds only one staging
    /// window during the load.
    Device(Gpu),
}

impl Destination {
    /// Short lowercase name.
    pub fn name(&self) -> &'static str {
        match self {
            Destination::Host => "host",
            Destination::Pinned(_) => "pinned",
            Destination::Device(_) => "device",
        }
    }
}

/// Default window of file converted at a time.
pub const DEFAULT_CHUNK_BYTES: u64 = 64 << 20;

/// Options for one load.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Point checks.
    pub check: PointCheck,
    /// Counts the caller's circuit needs; checked before anything is allocated.
    pub expected: ExpectedSizes,
    /// Bytes of file converted per window (rounded down to whole points, at least one).
    pub chunk_bytes: u64,
    /// Page-cache policy behind each window.
    pub page_cache: PageCache,
    /// Destination memory.
    pub destination: Destination,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            check: PointCheck::default(),
            expected: ExpectedSizes::default(),
            chunk_bytes: DEFAULT_CHUNK_BYTES,
            page_cache: PageCache::Keep,
            destination: Destination::Host,
        }
    }
}

/// What a load will charge, computed from the headers alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadPlan {
    /// Host bytes held once loaded: the bulk sections (host and pinned destinations) plus
    /// the verifying key.
    pub destination_bytes: u64,
    /// Extra host bytes resident only during the load: two windows of mapped file pages
    /// (the one converted and the one prefetched), plus a staging window for a device load.
    pub transient_bytes: u64,
    /// Bytes charged to the VRAM budget (device destination only).
    pub device_bytes: u64,
}

impl LoadPlan {
    /// What the reservation must cover before the first byte is copied.
    pub fn peak_bytes(&self) -> u64 {
        self.destination_bytes + self.transient_bytes
    }
}

/// The verifying key in the `bls-repr` layout. Always fully checked (it is small and
/// verification soundness depends on it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyingKeyRepr {
    /// alpha in G1.
    pub alpha_g1: G1AffineRepr,
    /// beta in G1.
    pub beta_g1: G1AffineRepr,
    /// beta in G2.
    pub beta_g2: G2AffineRepr,
    /// gamma in G2.
    pub gamma_g2: G2AffineRepr,
    /// delta in G1.
    pub delta_g1: G1AffineRepr,
    /// delta in G2.
    pub delta_g2: G2AffineRepr,
    /// One G1 point per public input.
    pub ic: Vec<G1AffineRepr>,
}

impl VerifyingKeyRepr {
    /// Bytes this key occupies in memory (roughly).
    pub fn bytes(&self) -> u64 {
        (3 * 96 + 3 * 192 + self.ic.len() * 96) as u64
    }
}

/// Bases in some memory. Pinned and device buffers hold the same bytes as `[T]` (the
/// `bls-repr` layout), stored as `u64` limbs because that is what the driver copies.
#[derive(Debug)]
#[non_exhaustive]
pub enum Bases<T> {
    /// Ordinary host memory.
    Host(Vec<T>),
    /// Page-locked host memory (`n_points` points of `T`).
    Pinned {
        /// The buffer, `n_points * size_of::<T>() / 8` limbs.
        buffer: PinnedBuffer<u64>,
        /// Number of points.
        n_points: usize,
        /// The point type.
        marker: PhantomData<T>,
    },
    /// Device memory (`n_points` points of `T`).
    Device {
        /// The buffer, `n_points * size_of::<T>() / 8` limbs, charged to the VRAM budget.
        buffer: DeviceBuffer<u64>,
        /// Number of points.
        n_points: usize,
        /// The point type.
        marker: PhantomData<T>,
    },
}

impl<T: bytemuck::Pod> Bases<T> {
    /// The points, when they are readable from the host (host or pinned memory; for pinned
    /// memory this waits for any copy queued on it).
    pub fn as_host(&self) -> Option<&[T]> {
        match self {
            Bases::Host(v) => Some(v),
            Bases::Pinned { buffer, .. } => buffer.as_slice().ok().map(bytemuck::cast_slice),
            Bases::Device { .. } => None,
        }
    }
    /// The pinned buffer, if the points are in pinned memory.
    pub fn as_pinned(&self) -> Option<&PinnedBuffer<u64>> {
        match self {
            Bases::Pinned { buffer, .. } => Some(buffer),
            _ => None,
        }
    }
    /// The device buffer, if the points are in device memory.
    pub fn as_device(&self) -> Option<&DeviceBuffer<u64>> {
        match self {
            Bases::Device { buffer, .. } => Some(buffer),
            _ => None,
        }
    }
    /// Number of points.
    pub fn len(&self) -> usize {
        match self {
            Bases::Host(v) => v.len(),
            Bases::Pinned { n_points, .. } | Bases::Device { n_points, .. } => *n_points,
        }
    }
    /// Whether there are no points.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Host bytes this holds a reservation for (pinned buffers carry their own).
    fn pinned_reserved_bytes(&self) -> u64 {
        match self {
            Bases::Pinned { buffer, .. } => buffer.reservation().bytes(),
            _ => 0,
        }
    }
    fn device_bytes(&self) -> u64 {
        match self {
            Bases::Device { buffer, .. } => buffer.reserved_bytes(),
            _ => 0,
        }
    }
}

/// Figures from one load.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadStats {
    /// Bytes of file converted.
    pub file_bytes: u64,
    /// Wall time of the load (after the reservation was granted).
    pub seconds: f64,
    /// What the reservation covered at the peak.
    pub peak_charged_bytes: u64,
    /// What it covers now.
    pub steady_charged_bytes: u64,
}

impl LoadStats {
    /// File bytes per second.
    pub fn bytes_per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.file_bytes as f64 / self.seconds
        } else {
            f64::INFINITY
        }
    }
}

/// A fully loaded parameter set. Dropping it frees the bases and returns the reservation.
#[derive(Debug)]
pub struct LoadedParams {
    layout: ParamsLayout,
    vk: VerifyingKeyRepr,
    h: Bases<G1AffineRepr>,
    l: Bases<G1AffineRepr>,
    a: Bases<G1AffineRepr>,
    b_g1: Bases<G1AffineRepr>,
    b_g2: Bases<G2AffineRepr>,
    destination: Destination,
    stats: LoadStats,
    reservation: Reservation,
}

impl LoadedParams {
    /// Parameters read by another reader (the zkey's) into host memory; `reservation`
    /// charges them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn host(
        layout: ParamsLayout,
        vk: VerifyingKeyRepr,
        h: Vec<G1AffineRepr>,
        l: Vec<G1AffineRepr>,
        a: Vec<G1AffineRepr>,
        b_g1: Vec<G1AffineRepr>,
        b_g2: Vec<G2AffineRepr>,
        stats: LoadStats,
        reservation: Reservation,
    ) -> LoadedParams {
        LoadedParams {
            layout,
            vk,
            h: Bases::Host(h),
            l: Bases::Host(l),
            a: Bases::Host(a),
            b_g1: Bases::Host(b_g1),
            b_g2: Bases::Host(b_g2),
            destination: Destination::Host,
            stats,
            reservation,
        }
    }

    /// The file's layout.
    pub fn layout(&self) -> &ParamsLayout {
        &self.layout
    }
    /// The verifying key.
    pub fn vk(&self) -> &VerifyingKeyRepr {
        &self.vk
    }
    /// `h_query`.
    pub fn h_query(&self) -> &Bases<G1AffineRepr> {
        &self.h
    }
    /// `l_query`.
    pub fn l_query(&self) -> &Bases<G1AffineRepr> {
        &self.l
    }
    /// `a_query`.
    pub fn a_query(&self) -> &Bases<G1AffineRepr> {
        &self.a
    }
    /// `b_g1_query`.
    pub fn b_g1_query(&self) -> &Bases<G1AffineRepr> {
        &self.b_g1
    }
    /// `b_g2_query`.
    pub fn b_g2_query(&self) -> &Bases<G2AffineRepr> {
        &self.b_g2
    }
    /// Where the bases live.
    pub fn destination(&self) -> &Destination {
        &self.destination
    }
    /// Figures from the load.
    pub fn stats(&self) -> LoadStats {
        self.stats
    }
    /// Host bytes currently charged to the budget for this entry (including the
    /// reservations that pinned buffers carry).
    pub fn charged_bytes(&self) -> u64 {
        self.reservation.bytes()
            + self.h.pinned_reserved_bytes()
            + self.l.pinned_reserved_bytes()
            + self.a.pinned_reserved_bytes()
            + self.b_g1.pinned_reserved_bytes()
            + self.b_g2.pinned_reserved_bytes()
    }
    /// Bytes charged to the VRAM budget (device destination).
    pub fn device_bytes(&self) -> u64 {
        self.h.device_bytes()
            + self.l.device_bytes()
            + self.a.device_bytes()
            + self.b_g1.device_bytes()
            + self.b_g2.device_bytes()
    }
}

/// An open parameter file: mapped, headers walked and validated, nothing else read.
#[derive(Debug)]
pub struct ParamsFile {
    path: PathBuf,
    file: File,
    map: Mmap,
    layout: ParamsLayout,
}

fn io_err(path: &Path, source: std::io::Error) -> SrsError {
    SrsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl ParamsFile {
    /// Maps the file and walks its six headers. Allocates nothing proportional to the file.
    ///
    /// Parameter files are treated as immutable: truncating or rewriting one while it is
    /// open is outside the contract (a mapped read past a truncation raises SIGBUS).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| io_err(path, e))?;
        // SAFETY: the mapping is read-only and shared, so we never write through it. Its
        // contents may change only if another process rewrites the file, which the contract
        // above excludes (the same assumption every `.params` loader makes).
        let map = unsafe { Mmap::map(&file) }.map_err(|e| io_err(path, e))?;
        let layout = ParamsLayout::parse(&map)?;
        Ok(ParamsFile {
            path: path.to_path_buf(),
            file,
            map,
            layout,
        })
    }

    /// The validated layout.
    pub fn layout(&self) -> &ParamsLayout {
        &self.layout
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What a load with these options would charge.
    pub fn plan(&self, options: &LoadOptions) -> LoadPlan {
        let vk_bytes = (3 * 96 + 3 * 192) + u64::from(self.layout.ic().n_points()) * 96;
        // Two windows of mapped pages (the one converted and the one prefetched), plus a
        // page either side of each from rounding to page bounds; never more than the file
        // (a small file is one window, mapped once).
        let window = effective_chunk_bytes(options.chunk_bytes, 192).min(self.layout.file_bytes());
        let mapped = (2 * window + 4 * page_size()).min(self.layout.file_bytes() + 2 * page_size());
        let bulk = self.layout.loaded_bulk_bytes();
        match options.destination {
            Destination::Host | Destination::Pinned(_) => LoadPlan {
                destination_bytes: bulk + vk_bytes,
                transient_bytes: mapped,
                device_bytes: 0,
            },
            Destination::Device(_) => LoadPlan {
                destination_bytes: vk_bytes,
                transient_bytes: mapped + window.min(bulk),
                device_bytes: bulk,
            },
        }
    }

    /// Reads and fully checks the verifying key, touching only its bytes.
    pub fn verifying_key(&self) -> Result<VerifyingKeyRepr> {
        let fixed = |i: usize| -> &[u8] {
            let (s, at) = VK_FIXED[i];
            &self.map[at as usize..(at + s.point_bytes()) as usize]
        };
        let g1 = |i: usize| -> Result<G1AffineRepr> {
            let mut out = [G1AffineRepr::default()];
            convert_points::<G1Kind>(
                fixed(i),
                &mut out,
                VK_FIXED[i].0,
                0,
                VK_FIXED[i].1,
                PointCheck::Full,
            )?;
            Ok(out[0])
        };
        let g2 = |i: usize| -> Result<G2AffineRepr> {
            let mut out = [G2AffineRepr::default()];
            convert_points::<G2Kind>(
                fixed(i),
                &mut out,
                VK_FIXED[i].0,
                0,
                VK_FIXED[i].1,
                PointCheck::Full,
            )?;
            Ok(out[0])
        };
        let ic_span = self.layout.ic();
        let mut ic = vec![G1AffineRepr::default(); ic_span.n_points() as usize];
        convert_points::<G1Kind>(
            &self.map[ic_span.data_offset() as usize..ic_span.end_offset() as usize],
            &mut ic,
            Section::Ic,
            0,
            ic_span.data_offset(),
            PointCheck::Full,
        )?;
        Ok(VerifyingKeyRepr {
            alpha_g1: g1(0)?,
            beta_g1: g1(1)?,
            beta_g2: g2(2)?,
            gamma_g2: g2(3)?,
            delta_g1: g1(4)?,
            delta_g2: g2(5)?,
            ic,
        })
    }

    /// Checks every point without keeping any (what `srs-inspect --check` does). Streams
    /// through the file window by window like a load; allocates one window of output.
    pub fn check_points(&self, check: PointCheck, options: &LoadOptions) -> Result<()> {
        self.verifying_key()?;
        for span in self.layout.bulk() {
            if span.section().is_g2() {
                self.stream::<G2Kind>(span, Out::Discard, check, options)?;
            } else {
                self.stream::<G1Kind>(span, Out::Discard, check, options)?;
            }
        }
        Ok(())
    }

    /// Loads under `budget`: reserves the plan's peak (fails at once if it does not fit),
    /// converts, and shrinks the reservation to the steady size.
    pub fn load(&self, budget: &Budget, options: &LoadOptions) -> Result<LoadedParams> {
        self.layout.check_expected(&options.expected)?;
        let plan = self.plan(options);
        let label = format!("srs {}", self.path.display());
        let reservation = budget
            .try_reserve(plan.peak_bytes(), Category::Srs, label.clone())
            .map_err(|source| SrsError::Budget {
                requested_bytes: plan.peak_bytes(),
                label,
                source,
            })?;
        self.load_reserved(reservation, options)
    }

    /// Loads into memory already charged by `reservation`, which must cover the plan's peak.
    /// On success the reservation is shrunk to the steady size and kept by the result; on
    /// error it is dropped, returning everything it held.
    pub fn load_reserved(
        &self,
        mut reservation: Reservation,
        options: &LoadOptions,
    ) -> Result<LoadedParams> {
        self.layout.check_expected(&options.expected)?;
        let plan = self.plan(options);
        if reservation.bytes() < plan.peak_bytes() {
            return Err(SrsError::ReservationTooSmall {
                reserved_bytes: reservation.bytes(),
                needed_bytes: plan.peak_bytes(),
            });
        }
        let peak_charged_bytes = reservation.bytes();
        let started = Instant::now();
        let _ = self.map.advise(Advice::Sequential);
        let vk = self.verifying_key()?;
        let [h, l, a, b_g1, b_g2] = self.layout.bulk();
        let h = self.load_section::<G1Kind>(h, options, &mut reservation)?;
        let l = self.load_section::<G1Kind>(l, options, &mut reservation)?;
        let a = self.load_section::<G1Kind>(a, options, &mut reservation)?;
        let b_g1 = self.load_section::<G1Kind>(b_g1, options, &mut reservation)?;
        let b_g2 = self.load_section::<G2Kind>(b_g2, options, &mut reservation)?;
        if let Destination::Device(gpu) = &options.destination {
            gpu.synchronize().map_err(|source| SrsError::Gpu {
                section: Section::BG2,
                source,
            })?;
        }
        let seconds = started.elapsed().as_secs_f64();
        // Pinned buffers took their share of the reservation with them; what is left covers
        // the verifying key (plus host bases for a host destination).
        let split_off = h.pinned_reserved_bytes()
            + l.pinned_reserved_bytes()
            + a.pinned_reserved_bytes()
            + b_g1.pinned_reserved_bytes()
            + b_g2.pinned_reserved_bytes();
        reservation.shrink_to(plan.destination_bytes.saturating_sub(split_off));
        let stats = LoadStats {
            file_bytes: self.layout.file_bytes(),
            seconds,
            peak_charged_bytes,
            steady_charged_bytes: reservation.bytes() + split_off,
        };
        crate::metrics::record_load(&stats);
        Ok(LoadedParams {
            layout: self.layout,
            vk,
            h,
            l,
            a,
            b_g1,
            b_g2,
            destination: options.destination.clone(),
            stats,
            reservation,
        })
    }

    fn load_section<K: PointKind>(
        &self,
        span: SectionSpan,
        options: &LoadOptions,
        reservation: &mut Reservation,
    ) -> Result<Bases<K::Repr>> {
        let n = span.n_points() as usize;
        let section = span.section();
        let gpu_err = |source| SrsError::Gpu { section, source };
        match &options.destination {
            Destination::Host => {
                let mut out = alloc_host::<K::Repr>(n).ok_or(SrsError::Alloc {
                    section,
                    requested_bytes: span.data_bytes(),
                })?;
                self.stream::<K>(span, Out::Slice(&mut out), options.check, options)?;
                Ok(Bases::Host(out))
            }
            Destination::Pinned(gpu) => {
                let share = reservation.split(span.data_bytes());
                let mut buffer = gpu
                    .alloc_pinned::<u64>(n * K::LIMBS, share)
                    .map_err(gpu_err)?;
                let limbs = buffer.as_mut_slice().map_err(gpu_err)?;
                let out: &mut [K::Repr] = bytemuck::cast_slice_mut(limbs);
                self.stream::<K>(span, Out::Slice(out), options.check, options)?;
                Ok(Bases::Pinned {
                    buffer,
                    n_points: n,
                    marker: PhantomData,
                })
            }
            Destination::Device(gpu) => {
                let label = format!("srs {} {}", self.path.display(), section);
                let mut buffer = gpu
                    .alloc_zeros::<u64>(n * K::LIMBS, &label)
                    .map_err(gpu_err)?;
                let mut sink = |start: usize, points: &[K::Repr]| -> Result<()> {
                    let limbs: &[u64] = bytemuck::cast_slice(points);
                    let at = start * K::LIMBS;
                    let mut view = buffer.slice_mut().slice_mut(at..at + limbs.len());
                    gpu.stream().memcpy_htod(limbs, &mut view).map_err(|code| {
                        gpu_err(GpuError::Driver {
                            call: "cuMemcpyHtoDAsync",
                            code,
                        })
                    })?;
                    // The staging window is reused for the next window: wait for the copy.
                    gpu.synchronize().map_err(gpu_err)
                };
                self.stream::<K>(span, Out::Sink(&mut sink), options.check, options)?;
                Ok(Bases::Device {
                    buffer,
                    n_points: n,
                    marker: PhantomData,
                })
            }
        }
    }

    /// Converts a section window by window, into `out` when given (else into a scratch
    /// window that is discarded: check-only mode). While window k is converted on the rayon
    /// pool, a helper thread faults in window k+1 (file pages and destination pages), so
    /// the kernel work overlaps the conversion; at most two windows are mapped at a time.
    fn stream<K: PointKind>(
        &self,
        span: SectionSpan,
        mut out: Out<'_, K::Repr>,
        check: PointCheck,
        options: &LoadOptions,
    ) -> Result<()> {
        let point_bytes = K::BYTES as u64;
        let per_window =
            (effective_chunk_bytes(options.chunk_bytes, point_bytes) / point_bytes) as usize;
        let n = span.n_points() as usize;
        let byte_range = |start: usize, end: usize| -> (usize, usize) {
            let from = (span.data_offset() + start as u64 * point_bytes) as usize;
            let to = (span.data_offset() + end as u64 * point_bytes) as usize;
            (from, to)
        };
        let windows: Vec<(usize, usize)> = (0..n)
            .step_by(per_window.max(1))
            .map(|s| (s, (s + per_window).min(n)))
            .collect();
        let mut scratch = Vec::new();
        if let Some(&(s, e)) = windows.first() {
            let (from, to) = byte_range(s, e);
            self.populate_source(from, to - from);
        }
        for (k, &(start, end)) in windows.iter().enumerate() {
            let next = windows.get(k + 1).copied();
            let (from, to) = byte_range(start, end);
            let (dst, dst_next): (&mut [K::Repr], &mut [K::Repr]) = match &mut out {
                Out::Slice(o) => {
                    let (head, tail) = o.split_at_mut(end);
                    let next_len = next.map_or(0, |(s, e)| e - s);
                    (&mut head[start..], &mut tail[..next_len])
                }
                Out::Sink(_) | Out::Discard => {
                    scratch.clear();
                    scratch.resize(end - start, K::Repr::default());
                    (&mut scratch[..], &mut [][..])
                }
            };
            let res = std::thread::scope(|scope| {
                if let Some((ns, ne)) = next {
                    let (nfrom, nto) = byte_range(ns, ne);
                    scope.spawn(move || {
                        self.populate_source(nfrom, nto - nfrom);
                        populate_destination(dst_next);
                    });
                }
                convert_points::<K>(
                    &self.map[from..to],
                    dst,
                    span.section(),
                    start as u64,
                    from as u64,
                    check,
                )
            });
            self.release_window(from, to - from, options.page_cache);
            res?;
            if let Out::Sink(sink) = &mut out {
                sink(start, &scratch)?;
            }
        }
        Ok(())
    }

    /// Maps a window of the file in with one call rather than a page fault per page; older
    /// kernels lack POPULATE_READ, so fall back to read-ahead.
    fn populate_source(&self, offset: usize, len: usize) {
        if self
            .map
            .advise_range(Advice::PopulateRead, offset, len)
            .is_err()
        {
            let _ = self.map.advise_range(Advice::WillNeed, offset, len);
        }
    }

    /// Drops the window's pages from our address space (and optionally the page cache).
    fn release_window(&self, offset: usize, len: usize, page_cache: PageCache) {
        // SAFETY: the mapping is read-only and shared (`Mmap::map`), so MADV_DONTNEED only
        // removes our page-table entries: a later read of the range faults the same file
        // bytes back in from the page cache or disk. No reference into the range outlives
        // the conversion that just finished, and nothing was written through the mapping.
        let _ = unsafe {
            self.map
                .unchecked_advise_range(UncheckedAdvice::DontNeed, offset, len)
        };
        if page_cache == PageCache::Drop {
            use std::os::fd::AsRawFd;
            // SAFETY: `self.file` is an open descriptor we own for the whole call; fadvise
            // only hints the kernel about caching and touches no memory of ours.
            let _ = unsafe {
                libc::posix_fadvise(
                    self.file.as_raw_fd(),
                    offset as libc::off_t,
                    len as libc::off_t,
                    libc::POSIX_FADV_DONTNEED,
                )
            };
        }
    }
}

/// Where a stream's converted windows go.
enum Out<'a, T> {
    /// Straight into host-visible memory.
    Slice(&'a mut [T]),
    /// Into a reused staging window, handed to the sink (first index, points) after each.
    Sink(&'a mut dyn FnMut(usize, &[T]) -> Result<()>),
    /// Nowhere (check only).
    Discard,
}

fn effective_chunk_bytes(chunk_bytes: u64, point_bytes: u64) -> u64 {
    (chunk_bytes / point_bytes).max(1) * point_bytes
}

pub(crate) fn page_size() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// Allocates `n` zeroed points. `calloc` hands large requests fresh zero pages from the
/// kernel, so this costs no write pass; the conversion is the first write. Returns `None`
/// when the allocator refuses.
pub(crate) fn alloc_host<T: bytemuck::Zeroable + Copy>(n: usize) -> Option<Vec<T>> {
    let v = bytemuck::allocation::try_zeroed_vec::<T>(n).ok()?;
    advise_huge_pages(&v);
    Some(v)
}

/// Faults in the destination pages of the next window ahead of the conversion.
fn populate_destination<T>(v: &mut [T]) {
    let Some((ptr, len)) = inner_pages(v) else {
        return;
    };
    // SAFETY: [ptr, ptr + len) is page-aligned and lies inside `v`, which we borrow mutably,
    // so no other code touches it meanwhile. MADV_POPULATE_WRITE only pre-faults pages
    // (already-present pages are left as they are), never changing their contents.
    let _ = unsafe { libc::madvise(ptr, len, libc::MADV_POPULATE_WRITE) };
}

/// The largest page-aligned range inside `v`, if any.
fn inner_pages<T>(v: &[T]) -> Option<(*mut libc::c_void, usize)> {
    let len = std::mem::size_of_val(v);
    let page = page_size() as usize;
    let start = v.as_ptr() as usize;
    let aligned = start.next_multiple_of(page);
    let usable = (start + len).saturating_sub(aligned) / page * page;
    (usable > 0).then_some((aligned as *mut libc::c_void, usable))
}

/// Asks for transparent huge pages on a large destination: 512x fewer page faults while it
/// is first written (the kernel may ignore the hint).
fn advise_huge_pages<T>(v: &[T]) {
    if std::mem::size_of_val(v) < (4 << 20) {
        return;
    }
    let Some((ptr, len)) = inner_pages(v) else {
        return;
    };
    // SAFETY: [ptr, ptr + len) is page-aligned and lies inside the allocation backing `v`,
    // which is live for the call; MADV_HUGEPAGE changes how the kernel backs those pages,
    // never their contents.
    let _ = unsafe { libc::madvise(ptr, len, libc::MADV_HUGEPAGE) };
}

/// A point group as the loader sees it.
pub(crate) trait PointKind {
    type Repr: bytemuck::Pod + Default + Send + Sync;
    const BYTES: usize;
    /// u64 limbs per point in the `bls-repr` layout.
    const LIMBS: usize = std::mem::size_of::<Self::Repr>() / 8;
    /// Parses the strict `.params` encoding (no curve check).
    fn parse(bytes: &[u8]) -> std::result::Result<Self::Repr, String>;
    fn is_identity(repr: &Self::Repr) -> bool;
    /// Returns (on_curve, in_subgroup) as far as `check` asks (unchecked parts are `true`).
    fn check(repr: &Self::Repr, bytes: &[u8], check: PointCheck) -> (bool, bool);
}

pub(crate) struct G1Kind;
pub(crate) struct G2Kind;

impl PointKind for G1Kind {
    type Repr = G1AffineRepr;
    const BYTES: usize = 96;
    fn parse(bytes: &[u8]) -> std::result::Result<G1AffineRepr, String> {
        let arr: &[u8; 96] = bytes.try_into().map_err(|_| "short point".to_string())?;
        G1AffineRepr::from_uncompressed(arr).map_err(|e| e.to_string())
    }
    fn is_identity(repr: &G1AffineRepr) -> bool {
        repr.is_identity()
    }
    fn check(repr: &G1AffineRepr, bytes: &[u8], check: PointCheck) -> (bool, bool) {
        match check {
            PointCheck::None => (true, true),
            // The curve equation on the converted limbs: no second conversion.
            PointCheck::Curve => (repr.is_on_curve(), true),
            PointCheck::Full => {
                if !repr.is_on_curve() {
                    return (false, false);
                }
                let Ok(arr) = <&[u8; 96]>::try_from(bytes) else {
                    return (false, false);
                };
                let p = bls12_381::G1Affine::from_uncompressed_unchecked(arr);
                let in_subgroup =
                    bool::from(p.is_some()) && bool::from(p.unwrap().is_torsion_free());
                (true, in_subgroup)
            }
        }
    }
}

impl PointKind for G2Kind {
    type Repr = G2AffineRepr;
    const BYTES: usize = 192;
    fn parse(bytes: &[u8]) -> std::result::Result<G2AffineRepr, String> {
        let arr: &[u8; 192] = bytes.try_into().map_err(|_| "short point".to_string())?;
        G2AffineRepr::from_uncompressed(arr).map_err(|e| e.to_string())
    }
    fn is_identity(repr: &G2AffineRepr) -> bool {
        repr.is_identity()
    }
    fn check(repr: &G2AffineRepr, bytes: &[u8], check: PointCheck) -> (bool, bool) {
        match check {
            PointCheck::None => (true, true),
            // The curve equation on the converted limbs: no second conversion.
            PointCheck::Curve => (repr.is_on_curve(), true),
            PointCheck::Full => {
                if !repr.is_on_curve() {
                    return (false, false);
                }
                let Ok(arr) = <&[u8; 192]>::try_from(bytes) else {
                    return (false, false);
                };
                let p = bls12_381::G2Affine::from_uncompressed_unchecked(arr);
                let in_subgroup =
                    bool::from(p.is_some()) && bool::from(p.unwrap().is_torsion_free());
                (true, in_subgroup)
            }
        }
    }
}

/// Points per parallel task: large enough to amortise scheduling, small enough to balance.
const TASK_POINTS: usize = 8192;

/// Converts `src` (encoded points) into `dst` in parallel. `first_index` and `first_offset`
/// locate `src[0]` for error reports. On failure reports one failing point (the first one a
/// task found; any failure stops the other tasks early).
pub(crate) fn convert_points<K: PointKind>(
    src: &[u8],
    dst: &mut [K::Repr],
    section: Section,
    first_index: u64,
    first_offset: u64,
    check: PointCheck,
) -> Result<()> {
    debug_assert_eq!(src.len(), dst.len() * K::BYTES);
    let one = |i: usize, bytes: &[u8], out: &mut K::Repr| -> Result<()> {
        let index = first_index + i as u64;
        let offset = first_offset + (i * K::BYTES) as u64;
        let repr = K::parse(bytes).map_err(|reason| SrsError::BadEncoding {
            section,
            index,
            offset,
            reason,
        })?;
        if K::is_identity(&repr) {
            return Err(SrsError::PointAtInfinity {
                section,
                index,
                offset,
            });
        }
        let (on_curve, in_subgroup) = K::check(&repr, bytes, check);
        if !on_curve {
            return Err(SrsError::NotOnCurve {
                section,
                index,
                offset,
            });
        }
        if !in_subgroup {
            return Err(SrsError::NotInSubgroup {
                section,
                index,
                offset,
            });
        }
        *out = repr;
        Ok(())
    };
    dst.par_chunks_mut(TASK_POINTS)
        .zip(src.par_chunks(TASK_POINTS * K::BYTES))
        .enumerate()
        .try_for_each(|(task, (out, bytes))| {
            for (j, (o, b)) in out.iter_mut().zip(bytes.chunks_exact(K::BYTES)).enumerate() {
                one(task * TASK_POINTS + j, b, o)?;
            }
            Ok(())
        })
}

/// Per-section point fillers for [`LoadedParams::in_memory`]: `g1(section, first_index,
/// out)` writes the points `first_index..first_index + out.len()` of a G1 section,
/// `g2(first_index, out)` those of `b_g2_query`. Called window by window, in parallel.
pub struct InMemoryFill<'a> {
    /// G1 points of `h`, `l`, `a` and `b_g1`.
    pub g1: &'a (dyn Fn(Section, usize, &mut [G1AffineRepr]) + Sync),
    /// G2 points of `b_g2`.
    pub g2: &'a (dyn Fn(usize, &mut [G2AffineRepr]) + Sync),
}

impl LoadedParams {
    /// Parameters made in memory instead of read from a file (for benchmarks' synthetic
    /// parameters, whose file would be needlessly large): `counts` are the `h`, `l`, `a`,
    /// `b_g1` and `b_g2` lengths, `fill` writes their points. They are charged as a file
    /// load of the same layout into `destination` would be (host and pinned: the bases
    /// and the verifying key, `Category::Srs`, reserved before anything is allocated;
    /// device: the verifying key and one staging window on the host, the bases on the
    /// GPU's VRAM budget). The points are taken as given: nothing checks them, so the
    /// caller vouches for them being on the curve (the MSMs assume so).
    pub fn in_memory(
        vk: VerifyingKeyRepr,
        counts: [usize; 5],
        destination: Destination,
        budget: &Budget,
        fill: &InMemoryFill<'_>,
    ) -> Result<LoadedParams> {
        let n_ic = u32::try_from(vk.ic.len()).map_err(|_| SrsError::CountOverflow {
            section: Section::Ic,
            offset: 0,
            n_points: u32::MAX,
        })?;
        let mut bulk_counts = [0u32; 5];
        for ((slot, n), section) in bulk_counts.iter_mut().zip(counts).zip(Section::BULK) {
            *slot = u32::try_from(n).map_err(|_| SrsError::CountOverflow {
                section,
                offset: 0,
                n_points: u32::MAX,
            })?;
        }
        let layout = ParamsLayout::from_counts(n_ic, bulk_counts);
        let vk_bytes = vk.bytes();
        let bulk = layout.loaded_bulk_bytes();
        let window = effective_chunk_bytes(DEFAULT_CHUNK_BYTES, 192).min(bulk.max(192));
        let (peak, steady) = match destination {
            Destination::Host | Destination::Pinned(_) => (vk_bytes + bulk, vk_bytes + bulk),
            Destination::Device(_) => (vk_bytes + window, vk_bytes),
        };
        let label = format!("srs in memory ({})", destination.name());
        let mut reservation = budget
            .try_reserve(peak, Category::Srs, label.clone())
            .map_err(|source| SrsError::Budget {
                requested_bytes: peak,
                label,
                source,
            })?;
        let started = Instant::now();
        let [h, l, a, b_g1, b_g2] = layout.bulk();
        let g1 = |span: SectionSpan, reservation: &mut Reservation| {
            let section = span.section();
            fill_section::<G1AffineRepr>(span, &destination, reservation, window, &|first, out| {
                (fill.g1)(section, first, out)
            })
        };
        let h = g1(h, &mut reservation)?;
        let l = g1(l, &mut reservation)?;
        let a = g1(a, &mut reservation)?;
        let b_g1 = g1(b_g1, &mut reservation)?;
        let b_g2 = fill_section::<G2AffineRepr>(
            b_g2,
            &destination,
            &mut reservation,
            window,
            &|first, out| (fill.g2)(first, out),
        )?;
        if let Destination::Device(gpu) = &destination {
            gpu.synchronize().map_err(|source| SrsError::Gpu {
                section: Section::BG2,
                source,
            })?;
        }
        let split_off = h.pinned_reserved_bytes()
            + l.pinned_reserved_bytes()
            + a.pinned_reserved_bytes()
            + b_g1.pinned_reserved_bytes()
            + b_g2.pinned_reserved_bytes();
        reservation.shrink_to(steady.saturating_sub(split_off));
        let stats = LoadStats {
            file_bytes: 0,
            seconds: started.elapsed().as_secs_f64(),
            peak_charged_bytes: peak,
            steady_charged_bytes: reservation.bytes() + split_off,
        };
        Ok(LoadedParams {
            layout,
            vk,
            h,
            l,
            a,
            b_g1,
            b_g2,
            destination,
            stats,
            reservation,
        })
    }
}

/// One section of [`LoadedParams::in_memory`] into its destination.
fn fill_section<T: bytemuck::Pod + Send>(
    span: SectionSpan,
    destination: &Destination,
    reservation: &mut Reservation,
    window_bytes: u64,
    fill: &(dyn Fn(usize, &mut [T]) + Sync),
) -> Result<Bases<T>> {
    let n = span.n_points() as usize;
    let section = span.section();
    let limbs_per_point = std::mem::size_of::<T>() / 8;
    let per_window = ((window_bytes as usize) / std::mem::size_of::<T>()).max(1);
    // Parallel over sub-windows of one window.
    let fill_par = |first: usize, out: &mut [T]| {
        let step = out
            .len()
            .div_ceil(rayon::current_num_threads().max(1))
            .max(1024);
        out.par_chunks_mut(step)
            .enumerate()
            .for_each(|(i, chunk)| fill(first + i * step, chunk));
    };
    let gpu_err = |source| SrsError::Gpu { section, source };
    match destination {
        Destination::Host => {
            let mut out = alloc_host::<T>(n).ok_or(SrsError::Alloc {
                section,
                requested_bytes: span.data_bytes(),
            })?;
            for (k, chunk) in out.chunks_mut(per_window).enumerate() {
                fill_par(k * per_window, chunk);
            }
            Ok(Bases::Host(out))
        }
        Destination::Pinned(gpu) => {
            let share = reservation.split(span.data_bytes());
            let mut buffer = gpu
                .alloc_pinned::<u64>(n * limbs_per_point, share)
                .map_err(gpu_err)?;
            let out: &mut [T] = bytemuck::cast_slice_mut(buffer.as_mut_slice().map_err(gpu_err)?);
            for (k, chunk) in out.chunks_mut(per_window).enumerate() {
                fill_par(k * per_window, chunk);
            }
            Ok(Bases::Pinned {
                buffer,
                n_points: n,
                marker: PhantomData,
            })
        }
        Destination::Device(gpu) => {
            let label = format!("srs in memory {section}");
            let mut buffer = gpu
                .alloc_zeros::<u64>(n * limbs_per_point, &label)
                .map_err(gpu_err)?;
            let mut staging = vec![T::zeroed(); per_window.min(n)];
            let mut start = 0;
            while start < n {
                let len = per_window.min(n - start);
                let window = &mut staging[..len];
                fill_par(start, window);
                let limbs: &[u64] = bytemuck::cast_slice(window);
                let at = start * limbs_per_point;
                let mut view = buffer.slice_mut().slice_mut(at..at + limbs.len());
                gpu.stream().memcpy_htod(limbs, &mut view).map_err(|code| {
                    gpu_err(GpuError::Driver {
                        call: "cuMemcpyHtoDAsync",
                        code,
                    })
                })?;
                // The staging window is refilled next: wait for the copy.
                gpu.synchronize().map_err(gpu_err)?;
                start += len;
            }
            Ok(Bases::Device {
                buffer,
                n_points: n,
                marker: PhantomData,
            })
        }
    }
}
