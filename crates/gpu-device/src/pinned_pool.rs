//! A pool of pinned host staging buffers, charged to the host budget.
//!
//! # Contract
//! - **Charged before allocated.** A miss charges the buffer's whole size class to the
//!   host [`Budget`] under [`Category::PinnedPool`] before the allocator is called; a
//!   refusal is [`PoolError::Budget`] and nothing is allocated. The charge lives inside the
//!   buffer: an idle pooled buffer stays charged until it is really freed.
//! - **Eviction.** The pool registers an [`Evictor`] with its budget: when a request
//!   elsewhere does not fit, idle buffers are freed (never one that is handed out). A miss
//!   asks for its charge with eviction but without waiting, so the pool's own idle buffers
//!   of other sizes make room for it.
//! - **Size classes.** A request of `len` elements is served by a buffer of
//!   [`size_class`]`(len)` elements: powers of two and three steps between them (at most
//!   25% waste). A power of two is its own class, so `acquire(2^k)` holds exactly `2^k`
//!   elements (callers that hand the whole buffer on, like gpu-ntt's `AbcSource::Pinned`,
//!   rely on it). Only buffers of exactly the class are reused.
//! - **Asynchronous copies.** A pinned copy is asynchronous: the host memory is read
//!   after the call returns. The pool makes reuse safe without the caller's help: before a
//!   buffer is handed out again or freed, [`StagingAllocator::wait_idle`] waits for every
//!   copy queued on it. For the CUDA buffers ([`StagingBuffer`]) those are the copies made
//!   by [`StagingBuffer::copy_to_device`] (each records an event) and the copies cudarc
//!   makes through [`StagingBuffer::pinned`]'s `host_slice()` (cudarc records its own
//!   event on the buffer). Host access ([`StagingBuffer::as_mut_slice`]) waits for both
//!   too. So dropping a [`Pooled`] guard right after queueing a copy is correct; the
//!   wait happens on the next use, off the critical path. The one way around it: copying
//!   from the plain slice [`StagingBuffer::as_slice`] returns with cudarc's
//!   `memcpy_htod` (no event is recorded for a plain slice); never do that.
//!
//! # Non-goals
//! No splitting of large buffers, no reuse of a larger class for a smaller request (the
//! budget's eviction frees idle buffers of unused sizes instead), no minimum idle time.
//!
//! # Cost model
//! A hit is a mutex, a scan of the idle list and an event query. A miss costs a budget
//! reservation and the allocation: pinning is slow (the kernel locks every page: 0.46–0.65
//! s per GiB measured on the H200 host), which is why buffers are kept and can be pinned
//! ahead ([`PinnedPool::prewarm`]).

use std::ops::{Deref, DerefMut, Range};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use cudarc::driver::{CudaEvent, CudaStream, DeviceRepr, ValidAsZeroBits};
use memory_budget::{Budget, BudgetError, Category, Evictor, EvictorRegistration, Reservation};

use crate::{DeviceBuffer, Gpu, GpuError, PinnedBuffer};

/// Why a pool could not hand out a buffer.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// The host budget refused the charge of a new buffer (nothing was allocated).
    #[error("host budget refused {requested_bytes} bytes of pinned staging ({class_len} elements) for {label}: {source}")]
    Budget {
        /// The pool's label.
        label: String,
        /// Bytes of the size class.
        requested_bytes: u64,
        /// Elements of the size class.
        class_len: usize,
        /// The budget's reason.
        #[source]
        source: BudgetError,
    },
    /// The size class times the element size overflows.
    #[error("pinned staging of {len} elements of {element_bytes} bytes overflows")]
    SizeOverflow {
        /// Elements asked for.
        len: usize,
        /// Bytes per element.
        element_bytes: u64,
    },
    /// Allocating, waiting for or copying a buffer failed in the driver.
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

/// The size class of a request of `len` elements: `len` rounded up to `2^e`, `1.25·2^e`,
/// `1.5·2^e` or `1.75·2^e` (the next power of two below 8). Powers of two map to
/// themselves; 0 maps to 1.
pub fn size_class(len: usize) -> usize {
    let len = len.max(1);
    if len <= 8 {
        return len.next_power_of_two();
    }
    // len > 8: the power of two just below (or at) len, in quarter steps.
    let high = 1usize << (usize::BITS - 1 - len.leading_zeros());
    if high == len {
        return len;
    }
    let step = high / 4;
    let q = (len - high).div_ceil(step);
    high + q * step
}

/// What a pool allocates. The CUDA allocator is [`CudaPinned`]; tests use a fake one.
pub trait StagingAllocator: Send + Sync + 'static {
    /// A buffer; it owns the reservation that pays for it and releases it when dropped,
    /// after its memory is freed.
    type Buffer: Send + 'static;
    /// Bytes per element.
    const ELEMENT_BYTES: u64;
    /// Allocates a buffer of exactly `len` elements, paid for by `charge`.
    fn allocate(&self, len: usize, charge: Reservation) -> Result<Self::Buffer, GpuError>;
    /// Elements the buffer holds.
    fn capacity(buffer: &Self::Buffer) -> usize;
    /// Blocks until no asynchronous copy reads or writes `buffer` any more.
    fn wait_idle(&self, buffer: &mut Self::Buffer) -> Result<(), GpuError>;
    /// Whether the copies this allocator knows of have completed (without waiting); the
    /// pool prefers such a buffer when several idle ones fit. A hint only: the pool still
    /// calls [`StagingAllocator::wait_idle`] before handing any buffer out.
    fn copies_done(&self, _buffer: &Self::Buffer) -> bool {
        true
    }
}

/// Counters of a pool (bytes are charged bytes, i.e. whole size classes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Bytes of every live buffer, idle or handed out (what the budget holds for the pool).
    pub charged_bytes: u64,
    /// Of those, bytes of idle buffers.
    pub idle_bytes: u64,
    /// The most `charged_bytes` since the pool was made or [`PinnedPool::reset_peak`].
    pub peak_charged_bytes: u64,
    /// Buffers allocated so far (misses).
    pub n_allocations: u64,
    /// Requests served by an idle buffer (hits).
    pub n_reuses: u64,
    /// Buffers freed (evicted, trimmed, or returned after the pool was dropped).
    pub n_frees: u64,
}

struct State<B> {
    /// Idle buffers with their capacity, oldest first.
    idle: Vec<(usize, B)>,
    stats: PoolStats,
    /// Set when the pool is dropped: returned buffers are freed, not kept.
    closed: bool,
}

struct Shared<A: StagingAllocator> {
    alloc: A,
    budget: Budget,
    label: String,
    state: Mutex<State<A::Buffer>>,
}

impl<A: StagingAllocator> Shared<A> {
    fn lock(&self) -> MutexGuard<'_, State<A::Buffer>> {
        // Every update is a few field writes with no panic point between them.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bytes_of(capacity: usize) -> u64 {
        capacity as u64 * A::ELEMENT_BYTES
    }

    /// Frees buffers that were taken out of the idle list (or returned after close):
    /// waits for their copies first, then drops them (memory, then charge). Called with
    /// no lock held: dropping a charge takes the budget's lock.
    fn free(&self, buffers: Vec<(usize, A::Buffer)>) -> u64 {
        let mut freed = 0;
        let n_freed = buffers.len() as u64;
        for (capacity, mut buffer) in buffers {
            // A failed wait (a broken context) still frees: the driver's free then waits or
            // fails on its own, and keeping the charge forever would be worse.
            let _ = self.alloc.wait_idle(&mut buffer);
            drop(buffer);
            freed += Self::bytes_of(capacity);
        }
        if freed > 0 {
            let mut st = self.lock();
            st.stats.charged_bytes -= freed;
            st.stats.n_frees += n_freed;
        }
        freed
    }

    /// Takes idle buffers, oldest first, until at least `at_least_bytes` (all of them
    /// with `u64::MAX`).
    fn take_idle(&self, at_least_bytes: u64) -> Vec<(usize, A::Buffer)> {
        let mut st = self.lock();
        let mut taken = Vec::new();
        let mut bytes = 0;
        while bytes < at_least_bytes && !st.idle.is_empty() {
            let (capacity, buffer) = st.idle.remove(0);
            bytes += Self::bytes_of(capacity);
            taken.push((capacity, buffer));
        }
        st.stats.idle_bytes -= bytes;
        taken
    }
}

impl<A: StagingAllocator> Evictor for Shared<A> {
    fn name(&self) -> &str {
        &self.label
    }

    fn evict(&self, at_least_bytes: u64) -> u64 {
        // Only idle buffers are in the list: handed-out ones are never seen here.
        let taken = self.take_idle(at_least_bytes);
        self.free(taken)
    }

    fn reclaimable_bytes(&self) -> u64 {
        self.lock().stats.idle_bytes
    }

    /// An idle staging buffer holds no data: giving it back costs a later allocation only.
    fn refill_cost(&self) -> memory_budget::RefillCost {
        memory_budget::RefillCost::Cheap
    }
}

/// A pool of pinned staging buffers (see the module docs). Dropping the pool frees its
/// idle buffers and unregisters its evictor; buffers still handed out are freed when
/// their guards drop.
pub struct PinnedPool<A: StagingAllocator> {
    shared: Arc<Shared<A>>,
    wait: Duration,
    // Unregisters the evictor when the pool is dropped.
    _evictor: EvictorRegistration,
}

impl<A: StagingAllocator> std::fmt::Debug for PinnedPool<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedPool")
            .field("label", &self.shared.label)
            .field("stats", &self.stats())
            .finish()
    }
}

impl<A: StagingAllocator> PinnedPool<A> {
    /// An empty pool over `alloc`, charging `budget`; `label` names its reservations and
    /// its evictor.
    pub fn with_allocator(alloc: A, budget: Budget, label: impl Into<String>) -> Self {
        let shared = Arc::new(Shared {
            alloc,
            budget: budget.clone(),
            label: label.into(),
            state: Mutex::new(State {
                idle: Vec::new(),
                stats: PoolStats::default(),
                closed: false,
            }),
        });
        let evictor = budget.register_evictor(shared.clone());
        PinnedPool {
            shared,
            wait: Duration::ZERO,
            _evictor: evictor,
        }
    }

    /// How long a miss may wait for the budget (default zero: evict, then refuse).
    pub fn with_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// The budget the pool charges.
    pub fn budget(&self) -> &Budget {
        &self.shared.budget
    }

    /// A buffer of at least `len` elements (exactly [`size_class`]`(len)`): an idle one
    /// of that class once its earlier copies are done, else a new one charged first.
    pub fn acquire(&self, len: usize) -> Result<Pooled<A>, PoolError> {
        self.acquire_inner(len, None)
    }

    /// As [`PinnedPool::acquire`], paid from `from`, a reservation the caller made for
    /// it (e.g. a proof's admitted working set): a new buffer's charge is split off `from`
    /// (no second request to the budget, so it cannot be refused or overtaken by a waiter
    /// in between); when an idle buffer is reused instead, as many bytes of `from` are
    /// released. When `from` holds less than a new buffer needs, the pool asks the budget
    /// as [`PinnedPool::acquire`] does.
    pub fn acquire_from(&self, len: usize, from: &mut Reservation) -> Result<Pooled<A>, PoolError> {
        self.acquire_inner(len, Some(from))
    }

    fn acquire_inner(
        &self,
        len: usize,
        from: Option<&mut Reservation>,
    ) -> Result<Pooled<A>, PoolError> {
        let (class, bytes) = Self::class_bytes(len)?;
        let hit = {
            let mut st = self.shared.lock();
            // Of the idle buffers of this class, one whose copies are done if any.
            let fits = |(c, _): &&(usize, A::Buffer)| *c == class;
            let at = st
                .idle
                .iter()
                .position(|e| fits(&e) && self.shared.alloc.copies_done(&e.1))
                .or_else(|| st.idle.iter().position(|e| fits(&e)));
            at.map(|i| {
                let (_, buffer) = st.idle.remove(i);
                st.stats.idle_bytes -= bytes;
                st.stats.n_reuses += 1;
                buffer
            })
        };
        let buffer = match hit {
            Some(mut buffer) => {
                if let Some(from) = from.filter(|f| f.budget().same_as(&self.shared.budget)) {
                    // Already charged to the pool: the caller's bytes for it go back.
                    from.release(bytes.min(from.bytes()));
                }
                if let Err(e) = self.shared.alloc.wait_idle(&mut buffer) {
                    self.shared.free(vec![(class, buffer)]);
                    return Err(e.into());
                }
                buffer
            }
            None => {
                let charge = match from {
                    Some(from)
                        if from.bytes() >= bytes && from.budget().same_as(&self.shared.budget) =>
                    {
                        let mut charge = from.split(bytes);
                        charge.set_category(Category::PinnedPool);
                        charge.set_label(self.shared.label.clone());
                        charge
                    }
                    _ => self
                        .shared
                        .budget
                        .request(bytes, Category::PinnedPool)
                        .label(self.shared.label.clone())
                        .reserve(Some(self.wait))
                        .map_err(|source| PoolError::Budget {
                            label: self.shared.label.clone(),
                            requested_bytes: bytes,
                            class_len: class,
                            source,
                        })?,
                };
                // On failure the charge is dropped with the error: nothing stays held.
                let buffer = self.shared.alloc.allocate(class, charge)?;
                let mut st = self.shared.lock();
                st.stats.charged_bytes += bytes;
                st.stats.peak_charged_bytes =
                    st.stats.peak_charged_bytes.max(st.stats.charged_bytes);
                st.stats.n_allocations += 1;
                buffer
            }
        };
        Ok(Pooled {
            buffer: Some(buffer),
            len,
            capacity: class,
            shared: self.shared.clone(),
        })
    }

    /// The size class of `len` and its bytes.
    fn class_bytes(len: usize) -> Result<(usize, u64), PoolError> {
        let class = size_class(len);
        let bytes =
            (class as u64)
                .checked_mul(A::ELEMENT_BYTES)
                .ok_or(PoolError::SizeOverflow {
                    len,
                    element_bytes: A::ELEMENT_BYTES,
                })?;
        Ok((class, bytes))
    }

    /// Pins ahead of use: makes sure at least `count` idle buffers of the size class of
    /// `len` are in the pool, allocating the missing ones now, each charged first with
    /// a non-blocking request that evicts nothing (a refusal stops the prewarm, it is
    /// not an error: later requests pin on demand as before). Returns the idle buffers
    /// of that class now. Pinning is slow (the kernel locks every page) and, done while
    /// proofs run, delays the driver calls of every thread; a server calls this before
    /// its first proof. The buffers stay idle, charged, and evictable like any other.
    pub fn prewarm(&self, len: usize, count: usize) -> Result<usize, PoolError> {
        let (class, bytes) = Self::class_bytes(len)?;
        let idle_of_class =
            |st: &State<A::Buffer>| st.idle.iter().filter(|(c, _)| *c == class).count();
        loop {
            if idle_of_class(&self.shared.lock()) >= count {
                return Ok(count);
            }
            let Ok(charge) = self
                .shared
                .budget
                .request(bytes, Category::PinnedPool)
                .label(self.shared.label.clone())
                .evict(false)
                .try_reserve()
            else {
                return Ok(idle_of_class(&self.shared.lock()));
            };
            let buffer = self.shared.alloc.allocate(class, charge)?;
            let mut st = self.shared.lock();
            st.stats.charged_bytes += bytes;
            st.stats.peak_charged_bytes = st.stats.peak_charged_bytes.max(st.stats.charged_bytes);
            st.stats.n_allocations += 1;
            st.stats.idle_bytes += bytes;
            st.idle.push((class, buffer));
        }
    }

    /// Counters now.
    pub fn stats(&self) -> PoolStats {
        self.shared.lock().stats
    }

    /// Bytes charged to the budget for this pool now (idle and handed-out buffers).
    pub fn charged_bytes(&self) -> u64 {
        self.stats().charged_bytes
    }

    /// Restarts [`PoolStats::peak_charged_bytes`] from the bytes charged now.
    pub fn reset_peak(&self) {
        let mut st = self.shared.lock();
        st.stats.peak_charged_bytes = st.stats.charged_bytes;
    }

    /// Frees idle buffers, oldest first, until at most `keep_bytes` of them remain;
    /// returns the bytes freed.
    pub fn trim(&self, keep_bytes: u64) -> u64 {
        let excess = self.stats().idle_bytes.saturating_sub(keep_bytes);
        if excess == 0 {
            return 0;
        }
        let taken = self.shared.take_idle(excess);
        self.shared.free(taken)
    }
}

impl<A: StagingAllocator> Drop for PinnedPool<A> {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        let taken = self.shared.take_idle(u64::MAX);
        self.shared.free(taken);
    }
}

/// A buffer handed out by a [`PinnedPool`]; goes back to the pool (still charged) when
/// dropped. Derefs to the allocator's buffer type. Dropping it while a copy from it is in
/// flight is fine: the pool waits for that copy before anyone touches the buffer again.
pub struct Pooled<A: StagingAllocator> {
    buffer: Option<A::Buffer>,
    len: usize,
    capacity: usize,
    shared: Arc<Shared<A>>,
}

impl<A: StagingAllocator> std::fmt::Debug for Pooled<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pooled")
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl<A: StagingAllocator> Pooled<A> {
    /// Elements asked for.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether zero elements were asked for.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Elements the buffer holds (its size class, at least [`Pooled::len`]).
    pub fn capacity(&self) -> usize {
        self.capacity
    }
    /// Bytes charged for it.
    pub fn charged_bytes(&self) -> u64 {
        Shared::<A>::bytes_of(self.capacity)
    }
}

impl<A: StagingAllocator> Deref for Pooled<A> {
    type Target = A::Buffer;
    fn deref(&self) -> &A::Buffer {
        // Present until drop.
        self.buffer
            .as_ref()
            .expect("pooled buffer present until drop")
    }
}

impl<A: StagingAllocator> DerefMut for Pooled<A> {
    fn deref_mut(&mut self) -> &mut A::Buffer {
        self.buffer
            .as_mut()
            .expect("pooled buffer present until drop")
    }
}

impl<A: StagingAllocator> Drop for Pooled<A> {
    fn drop(&mut self) {
        let Some(buffer) = self.buffer.take() else {
            return;
        };
        let bytes = self.charged_bytes();
        let mut st = self.shared.lock();
        if st.closed {
            drop(st);
            // The pool is gone: nobody will reuse it, so free it (after its copies).
            self.shared.free(vec![(self.capacity, buffer)]);
        } else {
            st.idle.push((self.capacity, buffer));
            st.stats.idle_bytes += bytes;
        }
    }
}

/// The CUDA allocator: portable, not write-combined pinned buffers ([`Gpu::alloc_pinned`])
/// of `T`, wrapped as [`StagingBuffer`]s.
pub struct CudaPinned<T> {
    gpu: Gpu,
    _marker: std::marker::PhantomData<fn() -> T>,
}

impl<T> CudaPinned<T> {
    /// Allocates through `gpu` (pinned memory is portable: usable with every device).
    pub fn new(gpu: Gpu) -> Self {
        CudaPinned {
            gpu,
            _marker: std::marker::PhantomData,
        }
    }
}

/// A pool of pinned `T` buffers on the CUDA driver.
pub type PinnedStagingPool<T> = PinnedPool<CudaPinned<T>>;

impl<T: PinnedWord> PinnedPool<CudaPinned<T>> {
    /// A pool of pinned buffers allocated through `gpu`, charged to the host `budget`.
    pub fn cuda(gpu: Gpu, budget: Budget, label: impl Into<String>) -> Self {
        PinnedPool::with_allocator(CudaPinned::new(gpu), budget, label)
    }
}

/// Element types a staging buffer can hold: plain words (every bit pattern valid, no
/// padding), so a buffer of them can be copied into device memory of another word type.
pub trait PinnedWord: DeviceRepr + ValidAsZeroBits + bytemuck::Pod + Send + Sync + 'static {}
impl PinnedWord for u32 {}
impl PinnedWord for u64 {}

impl<T: PinnedWord> StagingAllocator for CudaPinned<T> {
    type Buffer = StagingBuffer<T>;
    const ELEMENT_BYTES: u64 = std::mem::size_of::<T>() as u64;

    fn allocate(&self, len: usize, charge: Reservation) -> Result<StagingBuffer<T>, GpuError> {
        Ok(StagingBuffer {
            pinned: self.gpu.alloc_pinned::<T>(len, charge)?,
            fences: Vec::new(),
        })
    }

    fn capacity(buffer: &StagingBuffer<T>) -> usize {
        buffer.pinned.len()
    }

    fn wait_idle(&self, buffer: &mut StagingBuffer<T>) -> Result<(), GpuError> {
        buffer.wait_copies()
    }

    fn copies_done(&self, buffer: &StagingBuffer<T>) -> bool {
        // Only the fences of `copy_to_device` can be queried; cudarc's own event on the
        // buffer is waited for in `wait_idle`.
        buffer.fences.iter().all(CudaEvent::is_complete)
    }
}

/// A pinned staging buffer with the events of the copies queued from it.
pub struct StagingBuffer<T> {
    // Dropped last: cudarc's own drop waits for its event before freeing.
    pinned: PinnedBuffer<T>,
    /// Recorded after each [`StagingBuffer::copy_to_device`], on the copy's stream.
    fences: Vec<CudaEvent>,
}

impl<T: PinnedWord> StagingBuffer<T> {
    /// Elements held (the size class).
    pub fn capacity(&self) -> usize {
        self.pinned.len()
    }

    /// Waits for every copy queued from or into this buffer.
    fn wait_copies(&mut self) -> Result<(), GpuError> {
        for fence in self.fences.drain(..) {
            fence
                .synchronize()
                .map_err(GpuError::driver("cuEventSynchronize"))?;
        }
        // cudarc's event: copies made through `host_slice()`.
        self.pinned.as_slice().map(|_| ())
    }

    /// The whole buffer for host writes, once every copy queued on it has completed.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T], GpuError> {
        self.wait_copies()?;
        self.pinned.as_mut_slice()
    }

    /// The whole buffer for host reads, after copies into it. **Not** a copy source: a
    /// copy from a plain slice records no event (use [`StagingBuffer::copy_to_device`]).
    pub fn as_slice(&mut self) -> Result<&[T], GpuError> {
        self.wait_copies()?;
        self.pinned.as_slice()
    }

    /// The pinned buffer, for APIs that copy it through cudarc's `host_slice()` (which
    /// records cudarc's event, waited for before reuse), e.g. gpu-ntt's
    /// `AbcSource::Pinned`. It holds [`StagingBuffer::capacity`] elements.
    pub fn pinned(&self) -> &PinnedBuffer<T> {
        &self.pinned
    }

    /// Queues on `stream` the copy of `self[src]` into `dst`, starting `dst_offset`
    /// elements of `T` into it (`dst` is viewed as words of `T`, whatever its own word
    /// type: both are plain words). Asynchronous: an event recorded after it keeps the
    /// buffer from being written, reused or freed before the copy has read it.
    pub fn copy_to_device<D: PinnedWord>(
        &mut self,
        src: Range<usize>,
        dst: &mut DeviceBuffer<D>,
        dst_offset: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<(), GpuError> {
        let t_bytes = std::mem::size_of::<T>();
        let dst_len = dst.len() * std::mem::size_of::<D>() / t_bytes;
        if src.start > src.end || src.end > self.capacity() {
            return Err(GpuError::LengthMismatch {
                what: "staging copy source end (elements)",
                expected: self.capacity(),
                found: src.end,
            });
        }
        let n = src.end - src.start;
        if dst_offset.checked_add(n).is_none_or(|end| end > dst_len) {
            return Err(GpuError::LengthMismatch {
                what: "staging copy destination (elements)",
                expected: dst_len,
                found: dst_offset.saturating_add(n),
            });
        }
        if n == 0 {
            return Ok(());
        }
        // Earlier copies into this buffer (through cudarc) must land before it is read.
        let host = self.pinned.as_slice()?;
        let src = &host[src];
        // SAFETY: `T` and `D` are plain words (`bytemuck::Pod`: no padding, every bit
        // pattern valid), so viewing `dst`'s memory as `dst_len` values of `T` is valid;
        // `dst_len · size_of::<T>()` does not exceed `dst`'s bytes, which `transmute_mut`
        // checks again (None otherwise). The view borrows `dst` mutably for the copy.
        let mut view = unsafe { dst.slice_mut().transmute_mut::<T>(dst_len) }.ok_or(
            GpuError::LengthMismatch {
                what: "staging copy destination (bytes)",
                expected: dst_len,
                found: dst_len,
            },
        )?;
        let mut view = view.slice_mut(dst_offset..dst_offset + n);
        // A plain slice: cudarc queues cuMemcpyHtoDAsync and records nothing, so the
        // fence below is what keeps the pinned memory alive and unchanged until it ran.
        stream
            .memcpy_htod(src, &mut view)
            .map_err(GpuError::driver("cuMemcpyHtoDAsync"))?;
        let fence = stream
            .record_event(None)
            .map_err(GpuError::driver("cuEventRecord"))?;
        self.fences.push(fence);
        Ok(())
    }
}

impl<T> std::fmt::Debug for StagingBuffer<T>
where
    PinnedBuffer<T>: std::fmt::Debug,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StagingBuffer")
            .field("pinned", &self.pinned)
            .field("n_fences", &self.fences.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Host memory standing in for pinned buffers (the pool's bookkeeping, no GPU).
    struct HostAlloc;

    impl StagingAllocator for HostAlloc {
        type Buffer = (Vec<u8>, Reservation);
        const ELEMENT_BYTES: u64 = 1;
        fn allocate(&self, len: usize, charge: Reservation) -> Result<Self::Buffer, GpuError> {
            Ok((vec![0; len], charge))
        }
        fn capacity(buffer: &Self::Buffer) -> usize {
            buffer.0.len()
        }
        fn wait_idle(&self, _buffer: &mut Self::Buffer) -> Result<(), GpuError> {
            Ok(())
        }
    }

    #[test]
    fn idle_buffers_are_reclaimable_and_cheapest_to_give_back() {
        let budget = Budget::fixed(1 << 20);
        let pool = PinnedPool::with_allocator(HostAlloc, budget.clone(), "test pool");
        let a = pool.acquire(4096).expect("fits");
        let b = pool.acquire(1000).expect("fits");
        assert_eq!(budget.reclaimable_bytes(), 0, "handed out");
        let a_bytes = a.charged_bytes();
        drop(a);
        assert_eq!(budget.reclaimable_bytes(), a_bytes);
        assert_eq!(pool.stats().idle_bytes, a_bytes);
        let b_bytes = b.charged_bytes();
        drop(b);
        assert_eq!(budget.reclaimable_bytes(), a_bytes + b_bytes);
        assert_eq!(
            memory_budget::Evictor::refill_cost(&*pool.shared),
            memory_budget::RefillCost::Cheap
        );
        // A request short of `a`'s bytes: the buffer idle longest (`a`) is freed, the
        // other stays idle (and reclaimable).
        let r = budget
            .reserve(
                (1 << 20) - b_bytes,
                memory_budget::Category::Other,
                "other",
                Some(Duration::ZERO),
            )
            .expect("an idle buffer was freed");
        assert_eq!(pool.stats().charged_bytes, b_bytes);
        assert_eq!(budget.reclaimable_bytes(), b_bytes);
        drop(r);
    }

    #[test]
    fn size_classes_round_up_by_at_most_a_quarter_and_keep_powers_of_two() {
        assert_eq!(size_class(0), 1);
        for k in 0..40 {
            assert_eq!(size_class(1usize << k), 1usize << k);
        }
        let mut prev = 0;
        for len in 1..5000usize {
            let c = size_class(len);
            assert!(c >= len, "{len} -> {c}");
            assert!(c >= prev, "monotone at {len}");
            if len > 8 {
                assert!(
                    4 * (c - len) < len,
                    "{len} -> {c}: waste of a quarter or more"
                );
            }
            // Never past the next power of two (gpu-ntt derives its domain from it).
            assert!(c <= len.next_power_of_two(), "{len} -> {c}");
            assert_eq!(size_class(c), c, "a class is its own class");
            prev = c;
        }
    }
}
