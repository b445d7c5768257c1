//! Buffers for the large JSON bodies of long threads, kept warm between turns.
//!
//! Why: on a thread of 1,000 messages every turn writes two bodies of ~600 KB, the model
//! request and `/runs/wait`'s answer. glibc serves an allocation that size with a fresh memory
//! mapping once it is larger than anything freed before, which is every turn on the longest
//! thread, as it grows by a turn each time: the body's pages are faulted in one by one (zeroed
//! by the kernel first) and unmapped again when the HTTP stack is done with it. That was about
//! a fifth of such a turn's CPU. A body of at least [`WARM_FROM`] bytes is written into a
//! buffer an earlier body left on a small shelf, and its buffer goes back there when the HTTP
//! stack drops the last handle. The shelf is emptied with the heap trim when the daemon is
//! quiet (`memory_release`), so an idle daemon keeps none of it.

use std::sync::Mutex;

use bytes::Bytes;

/// Smaller bodies come from the heap's free lists already (glibc's mmap threshold starts at
/// 128 KiB): they are neither kept nor shrunk here.
pub const WARM_FROM: usize = 128 * 1024;
/// Buffers on the shelf at most: the two bodies of a turn, for a couple of turns at once.
const MAX_KEPT: usize = 4;
/// Bytes on the shelf at most: a body larger than this is never kept.
const MAX_KEPT_BYTES: usize = 16 * 1024 * 1024;

/// The process's shelf.
static SHELF: Shelf = Shelf::new();

/// An empty buffer for a body of about `expected` bytes: a kept one when the body is large.
pub fn buffer(expected: usize) -> Vec<u8> {
    SHELF.buffer(expected)
}

/// The finished body, for an HTTP client or response. A large one brings its buffer back to
/// the shelf when the last handle is dropped; a small one gives back its unused tail (the
/// model call holds its body until the answer comes).
pub fn into_body(body: Vec<u8>) -> Bytes {
    SHELF.finish(body)
}

/// Empties the shelf (the quiet-time release, before the heap trim).
pub fn release() {
    SHELF.release();
}

struct Shelf {
    kept: Mutex<Vec<Vec<u8>>>,
}

impl Shelf {
    const fn new() -> Self {
        Self {
            kept: Mutex::new(Vec::new()),
        }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        // A panic while holding the lock leaves only a list of empty buffers behind.
        self.kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn buffer(&self, expected: usize) -> Vec<u8> {
        if expected >= WARM_FROM {
            let mut kept = self.kept();
            // The smallest that fits, else the largest (growing it keeps its pages).
            let fits = kept
                .iter()
                .enumerate()
                .filter(|(_, b)| b.capacity() >= expected)
                .min_by_key(|(_, b)| b.capacity())
                .or_else(|| kept.iter().enumerate().max_by_key(|(_, b)| b.capacity()))
                .map(|(index, _)| index);
            if let Some(index) = fits {
                let mut buffer = kept.swap_remove(index);
                drop(kept);
                buffer.reserve(expected);
                return buffer;
            }
        }
        Vec::with_capacity(expected)
    }

    fn finish(&'static self, mut body: Vec<u8>) -> Bytes {
        if body.capacity() >= WARM_FROM {
            Bytes::from_owner(Kept { body, shelf: self })
        } else {
            body.shrink_to_fit();
            Bytes::from(body)
        }
    }

    fn release(&self) {
        let kept = std::mem::take(&mut *self.kept());
        drop(kept);
    }

    fn give_back(&self, mut buffer: Vec<u8>) {
        buffer.clear();
        let mut kept = self.kept();
        let held: usize = kept.iter().map(Vec::capacity).sum();
        if kept.len() < MAX_KEPT && held + buffer.capacity() <= MAX_KEPT_BYTES {
            kept.push(buffer);
        }
    }

    #[cfg(test)]
    fn kept_bytes(&self) -> usize {
        self.kept().iter().map(Vec::capacity).sum()
    }
}

/// A large body on its way out; its buffer returns to `shelf` when the body is dropped.
struct Kept {
    body: Vec<u8>,
    shelf: &'static Shelf,
}

impl AsRef<[u8]> for Kept {
    fn as_ref(&self) -> &[u8] {
        &self.body
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        self.shelf.give_back(std::mem::take(&mut self.body));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_bodies_reuse_their_buffers_and_small_ones_are_shrunk() {
        let shelf: &'static Shelf = Box::leak(Box::new(Shelf::new()));
        let mut first = shelf.buffer(WARM_FROM * 2);
        first.extend_from_slice(b"{\"a\":1}");
        let address = first.as_ptr();
        let body = shelf.finish(first);
        assert_eq!(&body[..], b"{\"a\":1}");
        let clone = body.clone();
        drop(body);
        assert_eq!(shelf.kept_bytes(), 0, "a handle still holds the body");
        drop(clone);
        assert!(shelf.kept_bytes() >= WARM_FROM * 2);

        let second = shelf.buffer(WARM_FROM + 1);
        assert_eq!(second.as_ptr(), address, "the kept buffer is reused");
        assert!(second.is_empty());
        assert_eq!(shelf.kept_bytes(), 0);
        drop(shelf.finish(second));

        let mut small = shelf.buffer(1024);
        small.extend_from_slice(b"[]");
        let small = shelf.finish(small);
        assert_eq!(&small[..], b"[]");
        drop(small);
        assert!(
            shelf.kept_bytes() >= WARM_FROM * 2,
            "small bodies are not kept"
        );

        shelf.release();
        assert_eq!(shelf.kept_bytes(), 0);
    }

    #[test]
    fn the_shelf_is_bounded() {
        let shelf: &'static Shelf = Box::leak(Box::new(Shelf::new()));
        let held: Vec<Bytes> = (0..MAX_KEPT + 2)
            .map(|_| shelf.finish(Vec::with_capacity(WARM_FROM)))
            .collect();
        drop(held);
        assert_eq!(shelf.kept().len(), MAX_KEPT);
        shelf.release();
        drop(shelf.finish(Vec::with_capacity(MAX_KEPT_BYTES + 1)));
        assert_eq!(shelf.kept_bytes(), 0, "a body over the byte cap is freed");
    }
}
