//! tmp
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_dm() {
    use antler_test_support::*;
    let fake = FakeSlack::start().await;
    let model = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let yaml = super::daemon_yaml(
        dir.path(),
        &model,
        &super::slack_driver::slack_section(&fake, ""),
    );
    let bot = super::Bot::start(&yaml).await;
    model.push(Reply::text("answer one"));
    fake.user_says_dm("U0000001", "hello");
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    for m in fake.messages() {
        eprintln!("MSG {m:?}");
    }
    for c in fake.calls() {
        eprintln!("CALL {} {}", c.method, c.params);
    }
    for e in fake.envelopes() {
        eprintln!("ENV {e:?}");
    }
    bot.stop().await;
}
