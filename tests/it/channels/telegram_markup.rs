//! Telegram's presentation through the real adapter: Markdown as Telegram HTML (with the plain
//! fallback when Telegram refuses the entities) and the optional reactions.

use antler_test_support::{BotFailure, FakeTelegram, Reply, private_chat};

use super::WAIT;
use super::telegram::{has_text, setup_bot};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markdown_becomes_telegram_html_with_a_plain_fallback() {
    let (fake, model, _dir, bot) = setup_bot("").await;
    model.push(Reply::text("**Done** with `a<b>`"));
    fake.send_text(private_chat(51), 51, "format please");
    let html = "<b>Done</b> with <code>a&lt;b&gt;</code>";
    fake.wait_for(WAIT, "html answer", |f| has_text(f, 51, html))
        .await;
    let last_edit = fake.calls_of("editMessageText").pop().expect("final edit");
    assert_eq!(last_edit.body["parse_mode"], "HTML");

    fake.fail_next(
        "editMessageText",
        BotFailure::BadRequest("Bad Request: can't parse entities: unsupported start tag".into()),
    );
    model.push(Reply::text("**plain** fallback"));
    fake.send_text(private_chat(51), 51, "again");
    fake.wait_for(WAIT, "plain answer", |f| {
        has_text(f, 51, "**plain** fallback")
    })
    .await;
    let last_edit = fake.calls_of("editMessageText").pop().expect("final edit");
    assert!(
        last_edit.body.get("parse_mode").is_none(),
        "the fallback is plain text"
    );
    bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reactions_mark_received_answered_and_failed_messages_when_enabled() {
    let (fake, model, _dir, bot) = setup_bot("    reactions: true\n").await;
    let reactions_on = |fake: &FakeTelegram, message_id: i64| -> Vec<String> {
        fake.calls_of("setMessageReaction")
            .iter()
            .filter(|c| c.body["message_id"] == message_id)
            .map(|c| {
                c.body["reaction"][0]["emoji"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
            .collect()
    };
    model.push(Reply::text("all good"));
    let asked = fake.send_text(private_chat(31), 31, "hello");
    fake.wait_for(WAIT, "the done reaction", |f| {
        reactions_on(f, asked).len() == 2
    })
    .await;
    assert_eq!(reactions_on(&fake, asked), ["👀", "👍"]);
    assert!(has_text(&fake, 31, "all good"));

    model.push(Reply::status(500));
    let failing = fake.send_text(private_chat(31), 31, "this will fail");
    fake.wait_for(WAIT, "the failed reaction", |f| {
        reactions_on(f, failing).len() == 2
    })
    .await;
    assert_eq!(reactions_on(&fake, failing), ["👀", "😢"]);
    bot.stop().await;

    // Off by default: the status message is enough on Telegram.
    let (fake, model, _dir, bot) = setup_bot("").await;
    model.push(Reply::text("quiet"));
    fake.send_text(private_chat(32), 32, "hi");
    fake.wait_for(WAIT, "the answer", |f| has_text(f, 32, "quiet"))
        .await;
    assert!(fake.calls_of("setMessageReaction").is_empty());
    bot.stop().await;
}
