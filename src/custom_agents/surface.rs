//! Where a conversation happens, as far as the system prompt cares: a chat platform shows
//! messages of a limited length (replies should be compact, long material goes into files);
//! the web chat, the console and the HTTP API show any length.

/// A chat platform and the longest message it shows, from its adapter's profile (the length
/// the daemon splits replies at).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChatSurface {
    /// The platform's name as people know it ("Telegram").
    pub platform: &'static str,
    pub max_chars: usize,
}

impl ChatSurface {
    /// The surface of a run's `channel_name`; `None` for the web chat, the console and the API
    /// (no channel name) and for channels that are not chat platforms (webhooks).
    pub fn for_channel(channel_name: Option<&str>) -> Option<Self> {
        let (platform, max_chars) = match channel_name? {
            antler_telegram::CHANNEL_NAME => {
                ("Telegram", antler_telegram::TELEGRAM_PROFILE.max_text_len)
            }
            antler_slack::CHANNEL_NAME => ("Slack", antler_slack::SLACK_PROFILE.max_text_len),
            antler_discord::CHANNEL_NAME => {
                ("Discord", antler_discord::DISCORD_PROFILE.max_text_len)
            }
            antler_feishu::CHANNEL_NAME => ("Feishu", antler_feishu::FEISHU_PROFILE.max_text_len),
            _ => return None,
        };
        Some(Self {
            platform,
            max_chars,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_platforms_have_their_length_and_other_surfaces_none() {
        let of = |name| ChatSurface::for_channel(Some(name)).map(|s| (s.platform, s.max_chars));
        assert_eq!(of("telegram"), Some(("Telegram", 4096)));
        assert_eq!(of("slack"), Some(("Slack", 3000)));
        assert_eq!(of("discord"), Some(("Discord", 2000)));
        assert_eq!(of("feishu"), Some(("Feishu", 4000)));
        assert_eq!(of("webhook"), None);
        assert_eq!(ChatSurface::for_channel(None), None);
    }
}
