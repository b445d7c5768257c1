//! teloxide errors mapped onto the platform-neutral `ChannelError` the manager branches on.

use antler_channel::ChannelError;
use teloxide::{ApiError, RequestError};

pub(crate) fn channel_error(error: RequestError) -> ChannelError {
    match error {
        RequestError::RetryAfter(seconds) => ChannelError::RateLimited {
            retry_after_secs: seconds.seconds() as f64,
        },
        RequestError::Api(ApiError::InvalidToken) => {
            ChannelError::Unauthorized("telegram answered 401/404 for the bot token".into())
        }
        RequestError::Api(ApiError::MessageNotModified) => ChannelError::NotModified,
        RequestError::Api(ApiError::TerminatedByOtherGetUpdates) => ChannelError::Conflict(
            "another getUpdates poller is running with this bot token (409 Conflict)".into(),
        ),
        RequestError::Api(ApiError::CantGetUpdates) => ChannelError::Conflict(
            "a webhook is set for this bot token, so getUpdates is refused (409 Conflict)".into(),
        ),
        RequestError::Api(ApiError::Unknown(text)) if text.starts_with("Conflict") => {
            ChannelError::Conflict(format!("telegram: {text}"))
        }
        RequestError::Api(api) => ChannelError::Platform(api.to_string()),
        RequestError::Network(e) => ChannelError::Network(e.to_string()),
        RequestError::Io(e) => ChannelError::Network(e.to_string()),
        RequestError::InvalidJson { source, .. } => {
            ChannelError::Network(format!("unreadable answer from the bot api: {source}"))
        }
        other => ChannelError::Platform(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use teloxide::types::Seconds;

    #[test]
    fn fatal_errors_are_recognised() {
        assert!(channel_error(RequestError::Api(ApiError::InvalidToken)).is_fatal());
        assert!(channel_error(RequestError::Api(ApiError::TerminatedByOtherGetUpdates)).is_fatal());
        assert!(
            channel_error(RequestError::Api(ApiError::Unknown(
                "Conflict: something new".into()
            )))
            .is_fatal()
        );
        let limited = channel_error(RequestError::RetryAfter(Seconds::from_seconds(3)));
        assert!(matches!(
            limited,
            ChannelError::RateLimited { retry_after_secs } if retry_after_secs == 3.0
        ));
        assert!(!limited.is_fatal());
    }
}
