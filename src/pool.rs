//! The component's allocator: blocks of up to 1 KiB come from per-size free lists, larger ones
//! from talc.
//!
//! A solve allocates and frees the same few small sizes over and over (request bodies, URLs,
//! reply text, the canonical ABI's copies of every string crossing the WIT); a free-list pop or
//! push is a handful of instructions. Freed small blocks stay in their list for the next
//! allocation of that size class (memory held is the peak per class, never more); large blocks
//! (images) go back to talc.
//!
//! Why it is kept, measured against talc alone (the same engine, A/B): 61.8k against 70.8k
//! instructions per canned solve through wasmtime (-13%; callgrind, the difference between
//! `driver-bench --canned 1300` and `--canned 300`). Its costs: 20 KB of component (366,627
//! against 346,607 bytes) and 50-85 bytes more per in-flight solve (1,769-1,809 against
//! 1,720-1,724, `driver-bench --solves 20000`).

use std::alloc::{GlobalAlloc, Layout};
use std::cell::UnsafeCell;
use std::ptr;

/// Size classes every 16 bytes: 16, 32, 48, ..., 1024. Finer than powers of two, so an
/// in-flight solve holds ~1.8 KiB, not ~2.4 KiB (`driver-bench --solves 100000`).
const GRAIN: usize = 16;
const CLASSES: usize = 64;
/// Every pooled block is allocated with this alignment; larger alignments go to talc.
const ALIGN: usize = 16;

/// Free lists in front of the allocator `A` (talc in the component). Single-threaded only.
pub(crate) struct Pool<A> {
    /// Head of each class's list; a free block's first word points to the next one.
    heads: UnsafeCell<[*mut u8; CLASSES]>,
    large: A,
}

// SAFETY: the component runs on one thread (no `atomics` target feature; see its `cfg`), and
// the tests use a pool from one thread only.
unsafe impl<A> Sync for Pool<A> {}

impl<A> Pool<A> {
    /// Empty lists in front of `large`.
    pub(crate) const fn new(large: A) -> Pool<A> {
        Pool { heads: UnsafeCell::new([ptr::null_mut(); CLASSES]), large }
    }
}

/// The class serving `layout`, if it is small and needs no more than [`ALIGN`].
fn class_of(layout: Layout) -> Option<usize> {
    let class = layout.size().saturating_sub(1) / GRAIN;
    (class < CLASSES && layout.align() <= ALIGN).then_some(class)
}

fn class_layout(class: usize) -> Layout {
    // SAFETY: a multiple of 16 up to 1024 with alignment 16 is a valid layout.
    unsafe { Layout::from_size_align_unchecked((class + 1) * GRAIN, ALIGN) }
}

unsafe impl<A: GlobalAlloc> GlobalAlloc for Pool<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let Some(class) = class_of(layout) else { return unsafe { self.large.alloc(layout) } };
        // SAFETY: single-threaded, and no reference to the heads outlives this call.
        let heads = unsafe { &mut *self.heads.get() };
        let head = heads[class];
        if head.is_null() {
            return unsafe { self.large.alloc(class_layout(class)) };
        }
        // SAFETY: `head` is a free block of this class; its first word is the next free block.
        heads[class] = unsafe { head.cast::<*mut u8>().read() };
        head
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let Some(class) = class_of(layout) else { return unsafe { self.large.dealloc(block, layout) } };
        let heads = unsafe { &mut *self.heads.get() };
        // SAFETY: the block is at least 16 bytes, aligned to 16, and no longer used by anyone.
        unsafe { block.cast::<*mut u8>().write(heads[class]) };
        heads[class] = block;
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size` forms a valid layout with this alignment.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (class_of(layout), class_of(new_layout)) {
            (Some(old), Some(new)) if old == new => block,
            (None, None) => unsafe { self.large.realloc(block, layout, new_size) },
            _ => {
                let moved = unsafe { self.alloc(new_layout) };
                if !moved.is_null() {
                    // SAFETY: both blocks are valid for the smaller of the two sizes.
                    unsafe { ptr::copy_nonoverlapping(block, moved, layout.size().min(new_size)) };
                    unsafe { self.dealloc(block, layout) };
                }
                moved
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::alloc::System;

    #[test]
    fn sizes_map_to_the_smallest_class_that_holds_them() {
        let class = |size, align| class_of(Layout::from_size_align(size, align).unwrap());
        assert_eq!(
            [class(0, 1), class(1, 1), class(16, 8), class(17, 1), class(32, 16)],
            [Some(0), Some(0), Some(0), Some(1), Some(1)]
        );
        assert_eq!(
            [class(1008, 1), class(1009, 1), class(1024, 4), class(1025, 1)],
            [Some(62), Some(63), Some(63), None]
        );
        assert_eq!(class(8, 32), None, "alignments above 16 go to the backing allocator");
    }

    #[test]
    fn a_freed_small_block_serves_the_next_allocation_of_its_class() {
        let pool = Pool::new(System);
        let (a, b) = (Layout::from_size_align(40, 8).unwrap(), Layout::from_size_align(48, 1).unwrap());
        unsafe {
            let first = pool.alloc(a);
            pool.dealloc(first, a);
            assert_eq!(pool.alloc(b), first, "40 and 48 bytes share the 48-byte class");
            assert_eq!(pool.realloc(first, b, 33), first, "a realloc within the class keeps the block");
            pool.dealloc(first, Layout::from_size_align(33, 1).unwrap());
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Alloc(usize),
        Realloc(usize, usize),
        Free(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        let size = prop_oneof![0usize..40, 0usize..1100, 1000usize..5000];
        prop_oneof![
            size.clone().prop_map(Op::Alloc),
            (any::<usize>(), size).prop_map(|(i, s)| Op::Realloc(i, s)),
            any::<usize>().prop_map(Op::Free),
        ]
    }

    proptest! {
        /// Any sequence of allocations, reallocations and frees keeps every live block's bytes
        /// (each filled with its own pattern), aligned, and apart from every other live block.
        #[test]
        fn live_blocks_keep_their_bytes_whatever_the_sequence(ops in prop::collection::vec(op(), 1..120)) {
            let pool = Pool::new(System);
            let mut live: Vec<(*mut u8, Layout, u8)> = Vec::new();
            let fill = |block: *mut u8, size: usize, byte: u8| unsafe { block.write_bytes(byte, size) };
            for (n, op) in ops.into_iter().enumerate() {
                let byte = n as u8;
                match op {
                    Op::Alloc(size) => {
                        let layout = Layout::from_size_align(size, 8).unwrap();
                        let block = unsafe { pool.alloc(layout) };
                        prop_assert!(!block.is_null() && (block as usize).is_multiple_of(8));
                        fill(block, size, byte);
                        live.push((block, layout, byte));
                    }
                    Op::Realloc(i, size) if !live.is_empty() => {
                        let (block, layout, old) = live.swap_remove(i % live.len());
                        let moved = unsafe { pool.realloc(block, layout, size) };
                        let kept = unsafe { std::slice::from_raw_parts(moved, layout.size().min(size)) };
                        prop_assert!(kept.iter().all(|&b| b == old));
                        fill(moved, size, byte);
                        live.push((moved, Layout::from_size_align(size, 8).unwrap(), byte));
                    }
                    Op::Free(i) if !live.is_empty() => {
                        let (block, layout, _) = live.swap_remove(i % live.len());
                        unsafe { pool.dealloc(block, layout) };
                    }
                    _ => {}
                }
                for &(block, layout, byte) in &live {
                    let bytes = unsafe { std::slice::from_raw_parts(block, layout.size()) };
                    prop_assert!(bytes.iter().all(|&b| b == byte), "a live block was overwritten");
                }
            }
            for (block, layout, _) in live {
                unsafe { pool.dealloc(block, layout) };
            }
        }
    }
}
