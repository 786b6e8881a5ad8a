//! Aligned I/O buffers: the only place that allocates memory for direct I/O.
//!
//! Buffers are zeroed when allocated and only ever written through safe slices afterwards, so
//! no safe function can observe uninitialised memory. They are reused: the writer owns exactly
//! two and hands them back and forth; readers borrow bounce buffers from a [`BufPool`].

use std::alloc::{self, Layout};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::Mutex;

/// A heap buffer whose address is a multiple of its alignment.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: AlignedBuf owns its allocation exclusively (like a Box<[u8]>); nothing else holds the
// pointer, so moving it to another thread or sharing `&AlignedBuf` (read-only) is sound.
unsafe impl Send for AlignedBuf {}
// SAFETY: see above; `&AlignedBuf` only gives out `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Allocates `len` zeroed bytes aligned to `align` (a power of two). `len` must be non-zero.
    pub fn zeroed(len: usize, align: usize) -> AlignedBuf {
        assert!(len > 0, "aligned buffers are never empty");
        let layout = Layout::from_size_align(len, align).expect("alignment is a power of two");
        // SAFETY: the layout has a non-zero size (asserted above).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        AlignedBuf { ptr, layout }
    }

    /// Capacity in bytes.
    pub fn len(&self) -> usize {
        self.layout.size()
    }
}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr points to `layout.size()` bytes that were zero-initialised at allocation
        // and are owned by self; the shared borrow of self prevents concurrent mutation.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`; the exclusive borrow of self makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: ptr was returned by alloc_zeroed with exactly this layout and is freed once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// A small pool of aligned buffers, for reads: full-size buffers, and small ones for the many
/// short reads (a small value, a 4 KiB range) so that they neither zero nor map a full-size
/// buffer each when more readers than [`POOL_KEEP`] are at work.
pub struct BufPool {
    size: usize,
    align: usize,
    free: Mutex<Vec<AlignedBuf>>,
    small: Mutex<Vec<AlignedBuf>>,
}

/// How many idle full-size buffers a pool keeps; more concurrent readers allocate and free
/// their own.
const POOL_KEEP: usize = 16;

/// Size of the small buffers (when below the pool's size).
pub const SMALL_BUF: usize = 64 << 10;

/// How many idle small buffers a pool keeps (8 MiB).
const SMALL_KEEP: usize = 128;

impl BufPool {
    /// A pool of `size`-byte buffers aligned to `align`.
    pub fn new(size: usize, align: usize) -> BufPool {
        BufPool {
            size,
            align,
            free: Mutex::new(Vec::new()),
            small: Mutex::new(Vec::new()),
        }
    }

    /// Borrows a full-size buffer; it returns to the pool when dropped.
    pub fn get(&self) -> PooledBuf<'_> {
        self.take(&self.free, self.size)
    }

    /// Borrows a buffer for a read of `len` bytes: a small one when `len` fits in
    /// [`SMALL_BUF`] (and that is smaller than the pool's size), else a full-size one (a longer
    /// read goes in several steps).
    pub fn get_for(&self, len: usize) -> PooledBuf<'_> {
        if len <= SMALL_BUF && SMALL_BUF < self.size {
            self.take(&self.small, SMALL_BUF)
        } else {
            self.get()
        }
    }

    /// A buffer of its own of `len` bytes (rounded up to the alignment), with the pool's
    /// alignment, not pooled: for a read whose buffer is kept after it (a record read whole and
    /// handed out without a copy).
    pub fn alloc(&self, len: usize) -> AlignedBuf {
        AlignedBuf::zeroed(len.max(1).next_multiple_of(self.align), self.align)
    }

    fn take(&self, list: &Mutex<Vec<AlignedBuf>>, size: usize) -> PooledBuf<'_> {
        let buf = list
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .unwrap_or_else(|| AlignedBuf::zeroed(size, self.align));
        PooledBuf {
            pool: self,
            buf: Some(buf),
        }
    }
}

/// A buffer borrowed from a [`BufPool`].
pub struct PooledBuf<'a> {
    pool: &'a BufPool,
    buf: Option<AlignedBuf>,
}

impl Deref for PooledBuf<'_> {
    type Target = AlignedBuf;
    fn deref(&self) -> &AlignedBuf {
        self.buf.as_ref().expect("present until drop")
    }
}

impl DerefMut for PooledBuf<'_> {
    fn deref_mut(&mut self) -> &mut AlignedBuf {
        self.buf.as_mut().expect("present until drop")
    }
}

impl Drop for PooledBuf<'_> {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            let (list, keep) = if buf.len() == self.pool.size {
                (&self.pool.free, POOL_KEEP)
            } else {
                (&self.pool.small, SMALL_KEEP)
            };
            let mut free = list.lock().unwrap_or_else(|p| p.into_inner());
            if free.len() < keep {
                free.push(buf);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        for align in [512usize, 4096, 65536] {
            let b = AlignedBuf::zeroed(3 * align, align);
            assert_eq!(b.as_ptr() as usize % align, 0);
            assert!(b.iter().all(|&x| x == 0));
            assert_eq!(b.len(), 3 * align);
        }
    }

    #[test]
    fn pool_reuses() {
        let pool = BufPool::new(4096, 4096);
        let first = {
            let mut b = pool.get();
            b[0] = 1;
            b.as_ptr() as usize
        };
        let b = pool.get();
        assert_eq!(b.as_ptr() as usize, first);
    }

    #[test]
    fn short_reads_get_small_buffers_and_each_size_returns_to_its_list() {
        let pool = BufPool::new(1 << 20, 4096);
        let (small, big) = {
            let s = pool.get_for(4608);
            let b = pool.get_for(SMALL_BUF + 1);
            assert_eq!(s.len(), SMALL_BUF);
            assert_eq!(s.as_ptr() as usize % 4096, 0);
            assert_eq!(b.len(), 1 << 20);
            (s.as_ptr() as usize, b.as_ptr() as usize)
        };
        assert_eq!(pool.get_for(SMALL_BUF).as_ptr() as usize, small);
        assert_eq!(pool.get().as_ptr() as usize, big);
        // A pool whose buffers are no larger than a small one hands out its own size.
        let tiny = BufPool::new(4096, 4096);
        assert_eq!(tiny.get_for(100).len(), 4096);
    }
}
