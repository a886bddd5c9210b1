//! A bump allocator for plugin instances that live for exactly one call.
//!
//! Memory comes from `memory.grow` in chunks of at least 128 KiB; freeing or growing the most
//! recent block happens in place (so a growing `Vec` or `String` does not leak its old
//! buffers), anything else is reclaimed when the host drops the instance. wasm32 components
//! are single-threaded, so plain cells suffice.

use core::alloc::{GlobalAlloc, Layout};
use core::cell::Cell;
use core::ptr;

const PAGE: usize = 64 * 1024;
const MIN_GROW_PAGES: usize = 2;

struct Bump {
    next: Cell<usize>,
    end: Cell<usize>,
}

// SAFETY: wasm32 plugin instances have a single thread.
unsafe impl Sync for Bump {}

impl Bump {
    /// Make room for `size` bytes at `align`, growing memory when needed.
    fn reserve(&self, size: usize, align: usize) -> Option<usize> {
        let start = self.next.get().checked_add(align - 1)? & !(align - 1);
        let new_next = start.checked_add(size)?;
        if new_next <= self.end.get() && self.end.get() != 0 {
            return Some(start);
        }
        let pages = size.div_ceil(PAGE).max(MIN_GROW_PAGES) + 1;
        let previous = core::arch::wasm32::memory_grow(0, pages);
        if previous == usize::MAX {
            return None;
        }
        let region = previous * PAGE;
        if region != self.end.get() {
            // Not contiguous with the current arena (or the first grow): start afresh.
            self.next.set(region);
        }
        self.end.set(region + pages * PAGE);
        let start = self.next.get().checked_add(align - 1)? & !(align - 1);
        Some(start)
    }
}

unsafe impl GlobalAlloc for Bump {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.reserve(layout.size(), layout.align()) {
            Some(start) => {
                self.next.set(start + layout.size());
                start as *mut u8
            }
            None => ptr::null_mut(),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if ptr as usize + layout.size() == self.next.get() {
            self.next.set(ptr as usize);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let start = ptr as usize;
        if start + layout.size() == self.next.get() && start + new_size <= self.end.get() {
            self.next.set(start + new_size);
            return ptr;
        }
        // SAFETY: same alignment, new size is non-zero per GlobalAlloc's contract.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are valid for the smaller size and do not overlap.
            unsafe { ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size)) };
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Bump = Bump {
    next: Cell::new(0),
    end: Cell::new(0),
};
