//! One run's SSE frames, kept so the request that started the run and any number of joiners
//! read them, each at its own pace, from the start or after the event id they last saw.
//!
//! The run's follower writes (never waits for a reader: a slow client cannot stall the run);
//! readers copy frames out under a short lock and wait on a `watch` for more. Each frame gets
//! the next id (1, 2, …), sent as the SSE `id:` so a client that comes back with
//! `Last-Event-ID` gets exactly the frames after it. Memory is bounded per run: past
//! [`MAX_BUFFERED_BYTES`] of frame data or [`MAX_BUFFERED_FRAMES`] frames the oldest are
//! dropped, so only a reader that far behind (or joining that late) misses the start.

use std::collections::VecDeque;
use std::sync::Mutex;

use tokio::sync::watch;

use super::stream::Frame;

/// Frame data one run keeps at most (its event names and JSON).
pub(crate) const MAX_BUFFERED_BYTES: usize = 8 * 1024 * 1024;
/// Frames one run keeps at most.
pub(crate) const MAX_BUFFERED_FRAMES: usize = 50_000;

pub(crate) struct FrameBuffer {
    frames: Mutex<Frames>,
    /// Bumped on every frame and at the end: what readers wait on.
    changed: watch::Sender<u64>,
    max_bytes: usize,
    max_frames: usize,
}

#[derive(Default)]
struct Frames {
    kept: VecDeque<(u64, Frame)>,
    bytes: usize,
    last_id: u64,
    done: bool,
}

/// What a read found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// Frames were handed over; read again after the last one.
    Frames { last_id: u64 },
    /// Nothing new yet: wait for a change.
    Empty,
    /// Nothing new, and the run has ended: no frame will come.
    Done,
}

impl Default for FrameBuffer {
    fn default() -> Self {
        Self::with_bounds(MAX_BUFFERED_BYTES, MAX_BUFFERED_FRAMES)
    }
}

impl FrameBuffer {
    pub(crate) fn with_bounds(max_bytes: usize, max_frames: usize) -> Self {
        Self {
            frames: Mutex::new(Frames::default()),
            changed: watch::Sender::new(0),
            max_bytes,
            max_frames,
        }
    }

    /// Appends a frame under the next id, dropping the oldest past the bounds.
    pub(crate) fn push(&self, frame: Frame) {
        let mut frames = self.lock();
        if frames.done {
            return;
        }
        frames.last_id += 1;
        let id = frames.last_id;
        frames.bytes += frame_size(&frame);
        frames.kept.push_back((id, frame));
        while frames.kept.len() > self.max_frames
            || (frames.bytes > self.max_bytes && frames.kept.len() > 1)
        {
            if let Some((_, dropped)) = frames.kept.pop_front() {
                frames.bytes -= frame_size(&dropped);
            }
        }
        drop(frames);
        self.changed.send_replace(id);
    }

    /// No frame will follow: readers finish once they have read what is kept.
    pub(crate) fn finish(&self) {
        let mut frames = self.lock();
        frames.done = true;
        let last = frames.last_id;
        drop(frames);
        self.changed.send_replace(last.saturating_add(1));
    }

    pub(crate) fn is_done(&self) -> bool {
        self.lock().done
    }

    /// A receiver that sees every change after this call: take it before reading, then wait
    /// on it when the read came back empty.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Hands `visit` every kept frame with an id above `after`, in order (under the buffer's
    /// lock: `visit` only copies).
    pub(crate) fn read_after(&self, after: u64, mut visit: impl FnMut(u64, &Frame)) -> Read {
        let frames = self.lock();
        let start = frames.kept.partition_point(|(id, _)| *id <= after);
        let mut last_id = None;
        for (id, frame) in frames.kept.range(start..) {
            visit(*id, frame);
            last_id = Some(*id);
        }
        match last_id {
            Some(last_id) => Read::Frames { last_id },
            None if frames.done => Read::Done,
            None => Read::Empty,
        }
    }

    /// Waits until the run has ended.
    pub(crate) async fn ended(&self) {
        let mut changes = self.subscribe();
        while !self.is_done() {
            if changes.changed().await.is_err() {
                return;
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Frames> {
        self.frames.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn frame_size(frame: &Frame) -> usize {
    frame.event.len() + frame.data.len()
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn frame(data: &str) -> Frame {
        Frame {
            event: Cow::Borrowed("values"),
            data: data.to_string(),
        }
    }

    fn read_all(buffer: &FrameBuffer, after: u64) -> (Vec<(u64, String)>, Read) {
        let mut seen = Vec::new();
        let read = buffer.read_after(after, |id, frame| seen.push((id, frame.data.clone())));
        (seen, read)
    }

    #[test]
    fn a_reader_resumes_after_the_id_it_last_saw_with_no_gap_or_repeat() {
        let buffer = FrameBuffer::default();
        for data in ["a", "b", "c"] {
            buffer.push(frame(data));
        }
        let (seen, read) = read_all(&buffer, 1);
        assert_eq!(seen, [(2, "b".into()), (3, "c".into())]);
        assert_eq!(read, Read::Frames { last_id: 3 });
        assert_eq!(read_all(&buffer, 3).1, Read::Empty);
        buffer.finish();
        assert_eq!(read_all(&buffer, 3).1, Read::Done);
        // A finished run still answers a late joiner from the start.
        assert_eq!(read_all(&buffer, 0).0.len(), 3);
    }

    #[test]
    fn the_oldest_frames_go_past_the_bounds() {
        let buffer = FrameBuffer::with_bounds(1024, 2);
        for data in ["a", "b", "c"] {
            buffer.push(frame(data));
        }
        let (seen, _) = read_all(&buffer, 0);
        assert_eq!(seen, [(2, "b".into()), (3, "c".into())]);
        let by_bytes = FrameBuffer::with_bounds(30, 100);
        for data in ["0123456789", "0123456789", "0123456789"] {
            by_bytes.push(frame(data));
        }
        // Each frame weighs 16 bytes ("values" + data): only the newest fits.
        let (seen, _) = read_all(&by_bytes, 0);
        assert_eq!(seen.iter().map(|(id, _)| *id).collect::<Vec<_>>(), [3]);
    }

    #[tokio::test]
    async fn a_waiting_reader_wakes_for_each_frame_and_the_end() {
        let buffer = Arc::new(FrameBuffer::default());
        let reader = {
            let buffer = buffer.clone();
            tokio::spawn(async move {
                let mut after = 0;
                let mut seen = Vec::new();
                loop {
                    let mut changes = buffer.subscribe();
                    match buffer.read_after(after, |_, frame| seen.push(frame.data.clone())) {
                        Read::Frames { last_id } => after = last_id,
                        Read::Done => return seen,
                        Read::Empty => {
                            let _ = changes.changed().await;
                        }
                    }
                }
            })
        };
        buffer.push(frame("a"));
        tokio::task::yield_now().await;
        buffer.push(frame("b"));
        buffer.finish();
        let seen = tokio::time::timeout(Duration::from_secs(5), reader)
            .await
            .expect("the reader ends with the run")
            .unwrap();
        assert_eq!(seen, ["a", "b"]);
        tokio::time::timeout(Duration::from_secs(5), buffer.ended())
            .await
            .expect("ended answers once finished");
    }
}
