//! `/voice`, `/voice on|off`: whether a chat conversation's answers are also spoken
//! (`voice.speech`), after the text. A chat platform keeps the choice in the chat record; the
//! web chat and the console show text only and say where spoken answers are.

use antler_channel::ReplyWithVoice;

use crate::commands::surface::{CommandError, CommandSurface, SettingChange, VoiceChoice};
use crate::config::AppConfig;

/// What the web chat and the console answer.
pub(crate) const TEXT_ONLY: &str = "Spoken answers are sent in chat platforms (Telegram, Slack, Discord, Feishu): use /voice on there. Here answers are text.";
/// What a chat answers while the server speaks nothing.
pub(crate) const SPEECH_OFF: &str =
    "Spoken answers are not available here: an admin turns them on with voice.speech.enabled.";

/// `/voice [on|off]` for `surface`.
pub(crate) async fn voice(
    surface: &dyn CommandSurface,
    config: &AppConfig,
    choice: Option<bool>,
) -> Result<String, CommandError> {
    let Some(current) = surface.voice().await? else {
        return Ok(TEXT_ONLY.into());
    };
    let enabled = config.voice.speech.enabled;
    Ok(match choice {
        Some(true) if !enabled => SPEECH_OFF.into(),
        Some(on) => {
            surface.change(SettingChange::Voice(on)).await?;
            if on {
                "Spoken answers on: my answers in this conversation come as text, then as a voice message.".into()
            } else {
                "Spoken answers off: my answers in this conversation are text only.".into()
            }
        }
        None if !enabled => SPEECH_OFF.into(),
        None => describe(&current),
    })
}

/// The conversation's state and what decides it.
fn describe(current: &VoiceChoice) -> String {
    let key = format!("channels.{}.reply_with_voice", current.channel_name);
    match (current.chosen, current.channel) {
        (Some(true), _) => {
            "Spoken answers are on in this conversation (/voice on); /voice off turns them off."
                .into()
        }
        (Some(false), _) => {
            "Spoken answers are off in this conversation (/voice off); /voice on turns them on."
                .into()
        }
        (None, ReplyWithVoice::Off) => format!(
            "Spoken answers are off: this channel's setting ({key}: off). /voice on turns them on in this conversation."
        ),
        (None, ReplyWithVoice::Auto) => format!(
            "Voice notes are answered with voice too, typed messages with text only: this channel's setting ({key}: auto). /voice on|off decides for this conversation."
        ),
        (None, ReplyWithVoice::Always) => format!(
            "Spoken answers are on: this channel's setting ({key}: always). /voice off turns them off in this conversation."
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choice(chosen: Option<bool>, channel: ReplyWithVoice) -> VoiceChoice {
        VoiceChoice {
            chosen,
            channel,
            channel_name: "telegram".into(),
        }
    }

    #[test]
    fn the_state_names_what_decides_it() {
        let text = describe(&choice(None, ReplyWithVoice::Auto));
        assert!(
            text.contains("channels.telegram.reply_with_voice: auto"),
            "{text}"
        );
        let text = describe(&choice(None, ReplyWithVoice::Off));
        assert!(text.starts_with("Spoken answers are off"), "{text}");
        // The conversation's choice wins over the channel's.
        let text = describe(&choice(Some(false), ReplyWithVoice::Always));
        assert!(
            text.contains("off in this conversation (/voice off)"),
            "{text}"
        );
        let text = describe(&choice(Some(true), ReplyWithVoice::Off));
        assert!(
            text.contains("on in this conversation (/voice on)"),
            "{text}"
        );
    }
}
