//! What the built-in tools, the middlewares and the features above them share, kept here so
//! none imports another: the `view_image` contract (its name, the size cap, the image types),
//! the memory source the dynamic context reads, and text helpers.

use std::time::Duration;

use async_trait::async_trait;

/// The built-in tool's name; the view-image middleware looks for its results.
pub const VIEW_IMAGE: &str = "view_image";

/// Largest image the model is shown; providers reject bigger inline images anyway.
pub const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;

/// The image type of `bytes` by its magic number.
pub fn sniff_image(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// The first `max` characters of `text` (never splits a UTF-8 character).
pub fn truncate_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((idx, _)) => &text[..idx],
        None => text,
    }
}

/// `1234567` → `"1,234,567"`.
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// How long memory may take to load before the turn goes on without it.
pub const MEMORY_LOAD_TIMEOUT: Duration = Duration::from_secs(5);

/// Supplies the memory text injected on a thread's first turn (`None` or blank: no memory).
/// The memory feature implements it; the dynamic-context middleware reads through it.
#[async_trait]
pub trait MemorySource: Send + Sync {
    async fn memory_for(&self, user_id: &str, agent_name: Option<&str>) -> Option<String>;
}

#[async_trait]
impl<F> MemorySource for F
where
    F: Fn(&str, Option<&str>) -> Option<String> + Send + Sync,
{
    async fn memory_for(&self, user_id: &str, agent_name: Option<&str>) -> Option<String> {
        self(user_id, agent_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_on_char_boundaries() {
        assert_eq!(truncate_chars("héllo", 2), "hé");
        assert_eq!(truncate_chars("hi", 5), "hi");
    }
}
