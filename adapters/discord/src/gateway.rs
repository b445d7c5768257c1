//! The gateway as a supervised transport: serenity's `Client` (IDENTIFY, heartbeats, RESUME
//! after a RECONNECT or a dropped socket, a new IDENTIFY after INVALID_SESSION, zlib frames)
//! with our event handler journalling what people say.
//!
//! Where the gateway is: `GET /gateway/bot` of the configured server, asked by us before each
//! session. serenity would ask `GET /gateway` itself and, if that fails, connect to
//! `wss://gateway.discord.gg` with only a warning — with `api_url` pointing at another server
//! that is the wrong server, so the URL we got replaces serenity's (`Client::ws_url`) and a
//! failure is an error. The answer's `session_start_limit` is honoured too: with no IDENTIFY
//! left, the transport waits `reset_after` instead of being refused.
//!
//! Health: the channel is live from READY (or RESUMED) on. A session that is not ready within
//! `ready_timeout` of starting or of losing its connection ends the run with an error, so the
//! channel shows as degraded and restarts with backoff rather than looking healthy while it
//! cannot identify; the old client is shut down (its socket closed) before the next one starts,
//! so there are never two sessions. Close codes 4004 (bad token) and 4014 (message content
//! intent not enabled) end the channel with what to fix.
//!
//! Gateway events cannot be acknowledged: a message is journalled as soon as it arrives, and a
//! MESSAGE_CREATE replayed after a RESUME is recognised by the journal. Interactions (slash
//! commands, button clicks) are journalled, then answered through their callback.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use antler_channel::{ChannelError, Transport, TransportContext};
use async_trait::async_trait;
use reqwest::Method;
use serenity::client::{ClientBuilder, Context, EventHandler};
use serenity::gateway::{
    ConnectionStage, GatewayError, ShardManager, ShardMessenger, ShardRunnerMessage,
};
use serenity::http::{Http, HttpBuilder};
use serenity::model::application::{ComponentInteraction, Interaction};
use serenity::model::channel::Message;
use serenity::model::event::ResumedEvent;
use serenity::model::gateway::{GatewayIntents, Ready};
use serenity::model::id::{ApplicationId, ShardId};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::DiscordChannel;
use crate::api::Body;
use crate::buttons::click_message;
use crate::commands::command_message;
use crate::convert::{Place, from_someone_else, inbound_message};

/// Messages in guilds and DMs, and their content (a privileged intent: it must be switched on
/// in the Developer Portal, or Discord closes the gateway with 4014).
fn intents() -> GatewayIntents {
    GatewayIntents::GUILD_MESSAGES
        | GatewayIntents::DIRECT_MESSAGES
        | GatewayIntents::MESSAGE_CONTENT
}

pub(crate) struct GatewayTransport {
    channel: Arc<DiscordChannel>,
}

impl GatewayTransport {
    pub(crate) fn new(channel: Arc<DiscordChannel>) -> Self {
        Self { channel }
    }

    /// `GET /gateway/bot`: the URL to connect to, once IDENTIFY is allowed.
    async fn gateway_url(&self) -> Result<String, ChannelError> {
        let answer = self
            .channel
            .api
            .call(Method::GET, "gateway", "gateway/bot", Body::Empty)
            .await
            .map_err(|error| {
                error.into_channel(
                    "find the gateway (GET /api/v10/gateway/bot of channels.discord.api_url)",
                )
            })?;
        let limit = &answer["session_start_limit"];
        if limit["remaining"].as_u64() == Some(0) {
            let reset_after_ms = limit["reset_after"].as_f64().unwrap_or(5_000.0);
            return Err(ChannelError::RateLimited {
                retry_after_secs: reset_after_ms / 1000.0,
            });
        }
        match answer["url"].as_str() {
            Some(url) if url.starts_with("ws://") || url.starts_with("wss://") => {
                Ok(url.to_string())
            }
            _ => Err(ChannelError::Platform(
                "discord's GET /gateway/bot answered without a ws:// or wss:// url".into(),
            )),
        }
    }

    /// serenity's REST client, used only by its gateway machinery. With `api_url` it goes to
    /// that server, which serenity allows only with its own rate limiter off (the gateway
    /// client makes no request of ours).
    fn http(&self) -> Http {
        let config = &self.channel.config;
        let mut builder = HttpBuilder::new(&self.channel.token);
        if config.api_url.is_some() {
            builder = builder
                .proxy(self.channel.api.origin())
                .ratelimiter_disabled(true);
        }
        if let Some(id) = config
            .application_id
            .as_deref()
            .and_then(|id| id.parse().ok())
            && id != 0
        {
            builder = builder.application_id(ApplicationId::new(id));
        }
        builder.build()
    }
}

#[async_trait]
impl Transport for GatewayTransport {
    async fn run(&self, ctx: TransportContext) -> Result<(), ChannelError> {
        let url = self.gateway_url().await?;
        let session = Arc::new(Session::default());
        let (failed, mut failures) = mpsc::unbounded_channel();
        let handler = Handler {
            channel: self.channel.clone(),
            ctx: ctx.clone(),
            session: session.clone(),
            failed,
        };
        let mut client = ClientBuilder::new_with_http(self.http(), intents())
            .event_handler(handler)
            .await
            .map_err(|e| ChannelError::Network(format!("cannot start the discord client: {e}")))?;
        *client.ws_url.lock().await = url;
        let manager = client.shard_manager.clone();
        let ready_timeout = self.channel.config.gateway_timing.ready_timeout;
        let mut check = tokio::time::interval((ready_timeout / 4).max(Duration::from_millis(50)));
        let outcome = {
            let start = client.start();
            tokio::pin!(start);
            loop {
                tokio::select! {
                    _ = ctx.stop.cancelled() => break Ok(()),
                    result = &mut start => break match result {
                        Err(serenity::Error::Gateway(error)) => Err(gateway_error(error)),
                        Err(error) => Err(ChannelError::Network(format!("discord gateway: {error}"))),
                        Ok(()) => Err(ChannelError::Network("the discord gateway session ended".into())),
                    },
                    Some(error) = failures.recv() => break Err(error),
                    _ = check.tick() => {
                        // The shard manager's view is authoritative; event handlers run
                        // concurrently and may report stages out of order.
                        let connected = manager
                            .runners
                            .lock()
                            .await
                            .values()
                            .any(|runner| runner.stage == ConnectionStage::Connected);
                        if connected {
                            session.set_ready();
                        } else {
                            session.lost();
                        }
                        if session.not_ready_for() > ready_timeout {
                            break Err(ChannelError::Network(format!(
                                "the discord gateway session was not ready (no READY or RESUMED) within {} s",
                                ready_timeout.as_secs_f64()
                            )));
                        }
                    }
                }
            }
        };
        session.retired.store(true, Ordering::SeqCst);
        close(&manager).await;
        outcome
    }
}

/// Closes every shard's socket before any next session: never two sessions at once.
///
/// `shutdown_all` alone is not enough: after a shard restarted itself (INVALID_SESSION),
/// serenity 0.12.5 leaves a stale "shutdown finished" note behind, so the next shutdown takes
/// the note for the answer, forgets the runner before the shutdown reaches it, and that runner
/// keeps its socket (a ghost session). Telling each runner directly first closes them for sure.
async fn close(manager: &ShardManager) {
    let runners: Vec<(ShardId, ShardMessenger)> = manager
        .runners
        .lock()
        .await
        .iter()
        .map(|(id, info)| (*id, info.runner_tx.clone()))
        .collect();
    for (id, messenger) in runners {
        messenger.send_to_shard(ShardRunnerMessage::Shutdown(id, 1000));
    }
    manager.shutdown_all().await;
}

/// What the daemon should do about a gateway error that ended the session.
fn gateway_error(error: GatewayError) -> ChannelError {
    match error {
        GatewayError::InvalidAuthentication => ChannelError::Unauthorized(
            "discord closed the gateway with 4004 (authentication failed); set channels.discord.bot_token to the bot's current token (Developer Portal → your application → Bot → Reset Token)".into(),
        ),
        GatewayError::DisallowedGatewayIntents => ChannelError::Config(
            "discord closed the gateway with 4014 (disallowed intents): the bot needs the Message Content Intent; turn on \"MESSAGE CONTENT INTENT\" under Developer Portal → your application → Bot → Privileged Gateway Intents (antler retries when its settings change)".into(),
        ),
        GatewayError::InvalidGatewayIntents => ChannelError::Config(
            "discord closed the gateway with 4013 (invalid intents); this antler build asks for intents discord does not know".into(),
        ),
        other => ChannelError::Network(format!("discord gateway: {other}")),
    }
}

/// Whether the current session is ready, and since when it is not.
struct Session {
    not_ready_since: Mutex<Option<Instant>>,
    commands_registered: AtomicBool,
    /// The run is over: a late event of its client is not journalled.
    retired: AtomicBool,
}

impl Default for Session {
    fn default() -> Self {
        Self {
            not_ready_since: Mutex::new(Some(Instant::now())),
            commands_registered: AtomicBool::new(false),
            retired: AtomicBool::new(false),
        }
    }
}

impl Session {
    fn set_ready(&self) {
        *self.lock() = None;
    }

    fn lost(&self) {
        self.lock().get_or_insert_with(Instant::now);
    }

    fn not_ready_for(&self) -> Duration {
        self.lock().map(|since| since.elapsed()).unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Instant>> {
        self.not_ready_since
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}

struct Handler {
    channel: Arc<DiscordChannel>,
    ctx: TransportContext,
    session: Arc<Session>,
    failed: mpsc::UnboundedSender<ChannelError>,
}

impl Handler {
    /// Where a guild channel is; `Ok(None)` for DMs.
    async fn place(&self, guild: bool, channel_id: &str) -> Result<Option<Place>, ChannelError> {
        if !guild {
            return Ok(None);
        }
        self.channel.place(channel_id).await.map(Some)
    }

    async fn journal(&self, message: Message) {
        let channel = &self.channel;
        if !from_someone_else(&message, &channel.identity) {
            return;
        }
        let channel_id = message.channel_id.to_string();
        let place = match self.place(message.guild_id.is_some(), &channel_id).await {
            Ok(place) => place,
            Err(error) => {
                tracing::warn!(%error, channel = %channel_id, "Could not tell where a discord message was posted; ignoring it");
                return;
            }
        };
        let thread_mode = channel.config.thread_mode;
        let Some(inbound) =
            inbound_message(&message, &channel.identity, place.as_ref(), thread_mode)
        else {
            return;
        };
        if thread_mode && place == Some(Place::Channel) {
            channel
                .threads
                .name_later(&inbound.platform_message_id, &inbound.text);
        }
        if let Err(error) = self.ctx.sink.accept(vec![inbound]).await {
            let _ = self.failed.send(ChannelError::Platform(error.to_string()));
        }
    }

    /// A button click: answered with a deferred update first (Discord never delivers an
    /// interaction again, and a follow-up the daemon sends for the click needs the interaction
    /// answered), then journalled like a message; when the journal fails, the clicker is told
    /// to try again.
    async fn click(&self, interaction: ComponentInteraction) {
        let channel_id = interaction.channel_id.to_string();
        let place = match self
            .place(interaction.guild_id.is_some(), &channel_id)
            .await
        {
            Ok(place) => place,
            Err(error) => {
                tracing::warn!(%error, "Could not tell where a button was clicked");
                return;
            }
        };
        let Some(message) = click_message(&interaction, place.as_ref()) else {
            return;
        };
        if let Err(error) = self.channel.defer_click(&interaction).await {
            tracing::debug!(%error, "Could not acknowledge a button click");
        }
        if let Err(error) = self.ctx.sink.accept(vec![message]).await {
            tracing::warn!(%error, "Could not journal a button click");
            if let Err(error) = self.channel.click_not_taken(&interaction).await {
                tracing::debug!(%error, "Could not tell the clicker to try again");
            }
        }
    }

    async fn command(&self, interaction: Interaction) {
        let command = match interaction {
            Interaction::Command(command) => command,
            Interaction::Component(component) => return self.click(component).await,
            _ => return,
        };
        let channel_id = command.channel_id.to_string();
        let place = match self.place(command.guild_id.is_some(), &channel_id).await {
            Ok(place) => place,
            Err(error) => {
                tracing::warn!(%error, "Could not tell where a slash command was used");
                return;
            }
        };
        let message = command_message(&command, place.as_ref());
        let note = match self.ctx.sink.accept(vec![message.clone()]).await {
            Ok(()) => format!("`{}`", message.text),
            Err(error) => {
                tracing::warn!(%error, "Could not journal a slash command");
                "I could not take that command; please try again.".to_string()
            }
        };
        if let Err(error) = self.channel.acknowledge(&command, &note).await {
            tracing::debug!(%error, "Could not acknowledge a slash command");
        }
    }

    async fn register_commands(&self, ready: &Ready) {
        let config = &self.channel.config;
        if !config.application_commands
            || self
                .session
                .commands_registered
                .swap(true, Ordering::SeqCst)
        {
            return;
        }
        let application_id = config
            .application_id
            .clone()
            .unwrap_or_else(|| ready.application.id.to_string());
        match self.channel.register_commands(&application_id).await {
            Ok(()) => tracing::info!(application_id, "Registered the discord slash commands"),
            Err(error) => {
                tracing::warn!(%error, "Could not register the discord slash commands; chat commands still work as messages")
            }
        }
    }
}

#[async_trait]
impl EventHandler for Handler {
    async fn ready(&self, _ctx: Context, ready: Ready) {
        self.session.set_ready();
        self.ctx.report_live();
        tracing::info!(bot = %ready.user.name, "Discord gateway session ready");
        self.register_commands(&ready).await;
    }

    async fn resume(&self, _ctx: Context, _event: ResumedEvent) {
        self.session.set_ready();
        self.ctx.report_live();
        tracing::info!("Discord gateway session resumed");
    }

    async fn message(&self, _ctx: Context, message: Message) {
        if !self.session.retired.load(Ordering::SeqCst) {
            self.journal(message).await;
        }
    }

    async fn interaction_create(&self, _ctx: Context, interaction: Interaction) {
        if !self.session.retired.load(Ordering::SeqCst) {
            self.command(interaction).await;
        }
    }
}
