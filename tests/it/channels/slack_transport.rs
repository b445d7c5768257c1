//! The Socket Mode transport on its own, with a sink the test controls: when envelopes are
//! acknowledged, what a failing journal does, and how a silent connection is replaced.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use antler_channel::{
    ChannelConfig, ChannelError, InboundMessage, InboundSink, Secret, SinkError, Transport,
    TransportContext,
};
use antler_slack::{SlackConfig, SocketTiming};
use antler_test_support::{FAKE_SLACK_APP_TOKEN, FAKE_SLACK_BOT_TOKEN, FakeSlack};
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::WAIT;

/// Journals slowly, optionally failing the first batch; records when each batch was durable.
#[derive(Default)]
struct SlowSink {
    fail_first: bool,
    calls: Mutex<u32>,
    durable: Mutex<Vec<(String, Instant)>>,
}

#[async_trait]
impl InboundSink for SlowSink {
    async fn accept(&self, messages: Vec<InboundMessage>) -> Result<(), SinkError> {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let call = {
            let mut calls = self.calls.lock().expect("calls");
            *calls += 1;
            *calls
        };
        if self.fail_first && call == 1 {
            return Err(SinkError("disk full".into()));
        }
        let mut durable = self.durable.lock().expect("durable");
        for message in messages {
            durable.push((message.text, Instant::now()));
        }
        Ok(())
    }
}

async fn transport(fake: &FakeSlack, timing: SocketTiming) -> Arc<dyn Transport> {
    let config = SlackConfig {
        enabled: true,
        bot_token: Some(Secret::new(FAKE_SLACK_BOT_TOKEN)),
        app_token: Some(Secret::new(FAKE_SLACK_APP_TOKEN)),
        api_url: Some(fake.api_url()),
        socket_timing: timing,
        ..SlackConfig::default()
    };
    let connection = config.adapter().connect().await.expect("connected");
    connection.transport.expect("socket mode has a transport")
}

fn context(sink: Arc<SlowSink>, stop: &CancellationToken) -> TransportContext {
    TransportContext::new(sink, stop.clone(), Arc::new(|| {}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envelopes_are_acknowledged_only_after_the_journal_has_them() {
    let fake = FakeSlack::start().await;
    fake.set_echo_bot_messages(false);
    let transport = transport(&fake, SocketTiming::default()).await;
    let sink = Arc::new(SlowSink {
        fail_first: true,
        ..SlowSink::default()
    });
    let stop = CancellationToken::new();
    fake.user_says_dm("U1", "first");
    // The journal fails: no acknowledgement, the run ends with an error the daemon retries.
    let failed = tokio::time::timeout(WAIT, transport.run(context(sink.clone(), &stop)))
        .await
        .expect("the run ends");
    assert!(
        matches!(failed, Err(ChannelError::Platform(_))),
        "{failed:?}"
    );
    assert!(fake.envelopes().iter().all(|e| e.acked_at.is_none()));
    // The next run gets the envelope again (Slack redelivers what was not acknowledged).
    let run = {
        let (transport, sink, stop) = (transport.clone(), sink.clone(), stop.clone());
        tokio::spawn(async move { transport.run(context(sink, &stop)).await })
    };
    fake.user_says_dm("U1", "second");
    fake.wait_for(WAIT, "both acknowledged", |f| {
        f.envelopes()
            .iter()
            .filter(|e| e.acked_at.is_some())
            .count()
            == 2
    })
    .await;
    let durable = sink.durable.lock().expect("durable").clone();
    let texts: Vec<&str> = durable.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(texts, ["first", "second"]);
    let mut acked: Vec<_> = fake
        .envelopes()
        .into_iter()
        .filter(|e| e.acked_at.is_some())
        .collect();
    acked.sort_by_key(|e| e.acked_at);
    for (envelope, (text, durable_at)) in acked.iter().zip(&durable) {
        let acked_at = envelope.acked_at.expect("acked");
        assert!(
            *durable_at <= acked_at,
            "{text:?} was acknowledged before the journal had it"
        );
        // Slack wants the acknowledgement within 3 s: it waits for the journal and nothing
        // else (above), which a loaded test machine cannot time.
        assert!(
            acked_at - envelope.sent_at >= Duration::from_millis(300),
            "acked after the slow journal"
        );
    }
    stop.cancel();
    assert!(
        run.await.expect("join").is_ok(),
        "a stop ends the run cleanly"
    );
    assert!(
        fake.connections().iter().all(|c| c.closed_at.is_some()),
        "no socket left open"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_closed_and_replaced() {
    let fake = FakeSlack::start().await;
    // Stale only after 3 s without a pong: a loaded machine does not delay pongs that long.
    let timing = SocketTiming {
        ping_interval: Duration::from_millis(200),
        stale_after: Duration::from_secs(3),
        hello_timeout: Duration::from_secs(5),
    };
    let transport = transport(&fake, timing).await;
    let sink = Arc::new(SlowSink::default());
    let stop = CancellationToken::new();
    let run = {
        let (transport, sink, stop) = (transport.clone(), sink.clone(), stop.clone());
        tokio::spawn(async move { transport.run(context(sink, &stop)).await })
    };
    fake.wait_for(WAIT, "the first connection", |f| {
        f.connections()
            .first()
            .is_some_and(|c| c.hello_at.is_some())
    })
    .await;
    // Pongs stop coming: the path is dead although the TCP connection is up.
    fake.freeze_connections();
    fake.wait_for(WAIT, "a replacement", |f| {
        f.connections()
            .iter()
            .filter(|c| c.hello_at.is_some())
            .count()
            >= 2
    })
    .await;
    fake.user_says_dm("U2", "still there?");
    let deadline = Instant::now() + WAIT;
    while sink.durable.lock().expect("durable").is_empty() {
        assert!(
            Instant::now() < deadline,
            "the message never arrived on the new connection"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.cancel();
    assert!(run.await.expect("join").is_ok());
}
