//! The outbound capabilities: send, edit, typing, upload and download through the Bot API.

use antler_channel::{
    Attachment, ChannelError, ChatKey, DownloadFile, EditMessage, InboundFile, React, SendMessage,
    SentMessage, TypingIndicator, UploadFile,
};
use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use teloxide::net::Download;
use teloxide::payloads::EditMessageTextSetters;
use teloxide::payloads::{
    SendAudioSetters, SendChatActionSetters, SendDocumentSetters, SendMessageSetters,
    SendPhotoSetters, SendVoiceSetters, SetMessageReactionSetters,
};
use teloxide::requests::Requester;
use teloxide::types::{
    ChatAction, ChatId, FileId, InlineKeyboardMarkup, InputFile, MessageId, ParseMode,
    ReactionType, ReplyParameters, ThreadId,
};
use teloxide::{ApiError, RequestError};

use crate::error::channel_error;
use crate::markup::to_html;
use crate::{TELEGRAM_PROFILE, TelegramChannel};

pub(crate) fn chat_id(chat: &ChatKey) -> Result<ChatId, ChannelError> {
    chat.chat_id
        .parse()
        .map(ChatId)
        .map_err(|_| ChannelError::Platform(format!("{chat} is not a telegram chat id")))
}

/// Forum topics are numeric; reply-chain topics (`m…`) have nothing to send back.
pub(crate) fn forum_thread(chat: &ChatKey) -> Option<ThreadId> {
    chat.topic_id
        .as_deref()
        .and_then(|topic| topic.parse().ok())
        .map(|id| ThreadId(MessageId(id)))
}

pub(crate) fn message_id(id: &str) -> Result<MessageId, ChannelError> {
    id.parse()
        .map(MessageId)
        .map_err(|_| ChannelError::Platform(format!("{id:?} is not a telegram message id")))
}

pub(crate) fn reply(reply_to: Option<&str>) -> Option<ReplyParameters> {
    let id = reply_to?.parse().ok()?;
    Some(ReplyParameters::new(MessageId(id)).allow_sending_without_reply())
}

pub(crate) fn sent(message: &teloxide::types::Message) -> SentMessage {
    SentMessage {
        platform_message_id: message.id.0.to_string(),
    }
}

#[async_trait]
impl SendMessage for TelegramChannel {
    async fn send_text(
        &self,
        chat: &ChatKey,
        text: &str,
        reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        self.send_markdown(chat, text, reply_to, None).await
    }
}

impl TelegramChannel {
    /// `sendMessage` of Markdown as HTML, with an inline keyboard when given; when Telegram
    /// refuses the markup the plain text always goes through.
    pub(crate) async fn send_markdown(
        &self,
        chat: &ChatKey,
        text: &str,
        reply_to: Option<&str>,
        keyboard: Option<InlineKeyboardMarkup>,
    ) -> Result<SentMessage, ChannelError> {
        let chat_id = chat_id(chat)?;
        let request = |body: String, html: bool| {
            let mut request = self.bot.send_message(chat_id, body);
            if let Some(keyboard) = &keyboard {
                request = request.reply_markup(keyboard.clone());
            }
            if html {
                request = request.parse_mode(ParseMode::Html);
            }
            if let Some(thread) = forum_thread(chat) {
                request = request.message_thread_id(thread);
            }
            if let Some(parameters) = reply(reply_to) {
                request = request.reply_parameters(parameters);
            }
            request
        };
        let result = match request(to_html(text), true).await {
            Err(RequestError::Api(ApiError::CantParseEntities(_))) => {
                request(text.to_string(), false).await
            }
            other => other,
        };
        result.map(|m| sent(&m)).map_err(channel_error)
    }
}

#[async_trait]
impl EditMessage for TelegramChannel {
    async fn edit_text(
        &self,
        chat: &ChatKey,
        message_id_text: &str,
        text: &str,
    ) -> Result<(), ChannelError> {
        let (chat_id, message_id) = (chat_id(chat)?, message_id(message_id_text)?);
        let html = self
            .bot
            .edit_message_text(chat_id, message_id, to_html(text))
            .parse_mode(ParseMode::Html)
            .await;
        let result = match html {
            Err(RequestError::Api(ApiError::CantParseEntities(_))) => {
                self.bot.edit_message_text(chat_id, message_id, text).await
            }
            other => other,
        };
        result.map(|_| ()).map_err(channel_error)
    }
}

#[async_trait]
impl TypingIndicator for TelegramChannel {
    async fn typing(&self, chat: &ChatKey) -> Result<(), ChannelError> {
        let mut request = self
            .bot
            .send_chat_action(chat_id(chat)?, ChatAction::Typing);
        if let Some(thread) = forum_thread(chat) {
            request = request.message_thread_id(thread);
        }
        request.await.map(|_| ()).map_err(channel_error)
    }
}

#[async_trait]
impl React for TelegramChannel {
    async fn react(
        &self,
        chat: &ChatKey,
        message_id_text: &str,
        reaction: &str,
    ) -> Result<(), ChannelError> {
        let emoji = ReactionType::Emoji {
            emoji: reaction.to_string(),
        };
        self.bot
            .set_message_reaction(chat_id(chat)?, message_id(message_id_text)?)
            .reaction(vec![emoji])
            .await
            .map(|_| ())
            .map_err(channel_error)
    }
}

#[async_trait]
impl UploadFile for TelegramChannel {
    async fn upload(
        &self,
        chat: &ChatKey,
        file: &Attachment,
        reply_to: Option<&str>,
    ) -> Result<SentMessage, ChannelError> {
        if file.size > TELEGRAM_PROFILE.max_upload_bytes {
            return Err(ChannelError::TooLarge {
                size: file.size,
                limit: TELEGRAM_PROFILE.max_upload_bytes,
            });
        }
        let input = InputFile::file(file.path.clone()).file_name(file.filename.clone());
        let chat_id = chat_id(chat)?;
        // A spoken answer: OGG/Opus plays as a voice message, any other format as audio.
        let message = if file.voice && is_ogg(file) {
            let mut request = self.bot.send_voice(chat_id, input);
            if let Some(thread) = forum_thread(chat) {
                request = request.message_thread_id(thread);
            }
            if let Some(parameters) = reply(reply_to) {
                request = request.reply_parameters(parameters);
            }
            request.await
        } else if file.voice {
            let mut request = self.bot.send_audio(chat_id, input);
            if let Some(thread) = forum_thread(chat) {
                request = request.message_thread_id(thread);
            }
            if let Some(parameters) = reply(reply_to) {
                request = request.reply_parameters(parameters);
            }
            request.await
        } else if file.is_image && file.size <= TELEGRAM_PROFILE.max_photo_bytes {
            let mut request = self.bot.send_photo(chat_id, input);
            if let Some(thread) = forum_thread(chat) {
                request = request.message_thread_id(thread);
            }
            if let Some(parameters) = reply(reply_to) {
                request = request.reply_parameters(parameters);
            }
            request.await
        } else {
            let mut request = self.bot.send_document(chat_id, input);
            if let Some(thread) = forum_thread(chat) {
                request = request.message_thread_id(thread);
            }
            if let Some(parameters) = reply(reply_to) {
                request = request.reply_parameters(parameters);
            }
            request.await
        };
        message.map(|m| sent(&m)).map_err(channel_error)
    }
}

/// `sendVoice` takes OGG with Opus (MP3 and M4A too, but those show as audio files).
fn is_ogg(file: &Attachment) -> bool {
    file.mime_type.eq_ignore_ascii_case("audio/ogg")
        || file.filename.to_ascii_lowercase().ends_with(".ogg")
        || file.filename.to_ascii_lowercase().ends_with(".opus")
}

#[async_trait]
impl DownloadFile for TelegramChannel {
    async fn download(&self, file: &InboundFile, max_bytes: u64) -> Result<Bytes, ChannelError> {
        let too_large = |size: u64| ChannelError::TooLarge {
            size,
            limit: max_bytes,
        };
        if let Some(size) = file.size.filter(|size| *size > max_bytes) {
            return Err(too_large(size));
        }
        let meta = self
            .bot
            .get_file(FileId(file.handle.clone()))
            .await
            .map_err(channel_error)?;
        if u64::from(meta.meta.size) > max_bytes && meta.meta.size != u32::MAX {
            return Err(too_large(u64::from(meta.meta.size)));
        }
        let mut stream = self.bot.download_file_stream(&meta.path);
        let mut bytes = BytesMut::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| ChannelError::Network(e.to_string()))?;
            bytes.extend_from_slice(&chunk);
            // The size in the metadata is a claim; the stream is what counts.
            if bytes.len() as u64 > max_bytes {
                return Err(too_large(bytes.len() as u64));
            }
        }
        Ok(bytes.freeze())
    }
}
