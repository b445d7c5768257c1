//! Who a chat platform's user is in Antler: `{channel}-{platform user id}`, and which of them
//! the channel sections make admins. Every surface asks here, so no code outside an adapter
//! parses platform ids.

use sha2::{Digest, Sha256};

use crate::config::AppConfig;

/// `{channel}-{platform_user_id}` reduced to `^[A-Za-z0-9_-]{1,64}$`. A lossy reduction gets a
/// hash suffix so two different platform ids never share one Antler user.
pub fn channel_user_id(channel: &str, platform_user_id: &str) -> String {
    const MAX: usize = 64;
    let raw = format!("{channel}-{platform_user_id}");
    let cleaned: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if cleaned == raw && raw.len() <= MAX {
        return raw;
    }
    let digest = hex::encode(Sha256::digest(raw.as_bytes()));
    let suffix = &digest[..16];
    let keep = MAX - suffix.len() - 1;
    let prefix: String = cleaned.chars().take(keep).collect();
    format!("{prefix}-{suffix}")
}

/// Whether `user_id` is listed in the `admins` of an enabled channel (as a platform id).
pub fn is_channel_admin(config: &AppConfig, user_id: &str) -> bool {
    config
        .channels
        .sections()
        .into_iter()
        .filter(|section| section.enabled())
        .any(|section| {
            section
                .access()
                .admins
                .iter()
                .any(|admin| channel_user_id(section.name(), admin) == user_id)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_ids_are_sanitised_without_collisions() {
        assert_eq!(channel_user_id("telegram", "42"), "telegram-42");
        let odd = channel_user_id("slack", "U1.x");
        assert!(odd.starts_with("slack-U1-x-"), "{odd}");
        assert_ne!(odd, channel_user_id("slack", "U1/x"));
        let long = channel_user_id("telegram", &"9".repeat(100));
        assert_eq!(long.len(), 64);
        let valid = |id: &str| {
            id.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        assert!(valid(&odd) && valid(&long));
    }

    #[test]
    fn admins_of_enabled_channels_only() {
        let mut config = AppConfig::default();
        config.channels.telegram.enabled = true;
        config.channels.telegram.admins = vec!["42".into()];
        assert!(is_channel_admin(&config, "telegram-42"));
        assert!(!is_channel_admin(&config, "telegram-43"));
        assert!(!is_channel_admin(&config, "slack-42"));
        config.channels.telegram.enabled = false;
        assert!(
            !is_channel_admin(&config, "telegram-42"),
            "a disabled channel grants nothing"
        );
    }
}
