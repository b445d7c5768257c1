//! An OGG/Opus file's length from its last page's granule position, for a note whose platform
//! gave no duration (`voice.transcription.max_seconds` is checked before anything is sent).

/// Opus granule positions count 48 kHz samples, whatever the input rate was.
const OPUS_RATE: u64 = 48_000;
/// How far from the end the last page header is looked for: a page is at most 65,307 bytes.
const TAIL: usize = 65_536;

/// The length in whole seconds (rounded up), or `None` when the bytes are not OGG/Opus or
/// carry no granule position.
pub(crate) fn duration_seconds(bytes: &[u8]) -> Option<u32> {
    if !bytes.starts_with(b"OggS") || !bytes.windows(8).take(64).any(|w| w == b"OpusHead") {
        return None;
    }
    let pre_skip = pre_skip(bytes).unwrap_or(0);
    let tail_start = bytes.len().saturating_sub(TAIL);
    let tail = &bytes[tail_start..];
    let page = (0..tail.len().saturating_sub(14))
        .rev()
        .find(|&at| tail[at..].starts_with(b"OggS") && tail[at + 4] == 0)?;
    let granule = i64::from_le_bytes(tail[page + 6..page + 14].try_into().ok()?);
    // -1 means "no packet ends on this page".
    let samples = u64::try_from(granule).ok()?.saturating_sub(pre_skip);
    u32::try_from(samples.div_ceil(OPUS_RATE)).ok()
}

/// `OpusHead`'s pre-skip: samples at the start the decoder drops.
fn pre_skip(bytes: &[u8]) -> Option<u64> {
    let head = bytes.windows(8).take(64).position(|w| w == b"OpusHead")?;
    let field = bytes.get(head + 10..head + 12)?;
    Some(u64::from(u16::from_le_bytes([field[0], field[1]])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_note_is_as_long_as_its_last_granule_says() {
        // 1.48 s of speech: 70,939 samples at 48 kHz less a pre-skip of 312.
        assert_eq!(
            duration_seconds(antler_test_support::VOICE_NOTE_OGG),
            Some(2)
        );
    }

    #[test]
    fn other_bytes_have_no_length() {
        assert_eq!(duration_seconds(b"ID3\x03 an mp3"), None);
        assert_eq!(duration_seconds(b"OggS"), None);
        let mut cut = antler_test_support::VOICE_NOTE_OGG[..200].to_vec();
        cut.extend_from_slice(b"trailing");
        assert_eq!(duration_seconds(&cut), Some(0));
    }
}
