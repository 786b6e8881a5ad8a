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

/// A small pool of equal-sized aligned buffers, for reads.
pub struct BufPool {
    size: usize,
    align: usize,
    free: Mutex<Vec<AlignedBuf>>,
}

/// How many idle buffers a pool keeps; more concurrent readers allocate and free their own.
const POOL_KEEP: usize = 16;

impl BufPool {
    /// A pool of `size`-byte buffers aligned to `align`.
    pub fn new(size: usize, align: usize) -> BufPool {
        BufPool {
            size,
            align,
            free: Mutex::new(Vec::new()),
        }
    }

    /// Borrows a buffer; it returns to the pool when dropped.
    pub fn get(&self) -> PooledBuf<'_> {
        let buf = self
            .free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop()
            .unwrap_or_else(|| AlignedBuf::zeroed(self.size, self.align));
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
            let mut free = self.pool.free.lock().unwrap_or_else(|p| p.into_inner());
            if free.len() < POOL_KEEP {
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
}
