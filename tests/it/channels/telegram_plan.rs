//! Plan mode in a Telegram chat: `/plan on`, then the status message shows the todo list
//! (☐ / ▶ / ☑) live while the agent works, under the chat's edit pace.

use std::time::Duration;

use antler_test_support::{Reply, private_chat};
use serde_json::json;

use super::WAIT;
use super::telegram::setup_bot;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_message_shows_the_todo_list_as_it_changes() {
    let (fake, model, _dir, bot) = setup_bot("").await;
    fake.send_text(private_chat(77), 77, "/plan on");
    fake.wait_for(WAIT, "plan mode confirmed", |f| {
        f.chat_texts(77).iter().any(|t| t == "Plan mode on.")
    })
    .await;

    model
        .push(Reply::tool_call(
            "write_todos",
            json!({"todos": [
                {"content": "Read the data", "status": "completed"},
                {"content": "Plot it", "status": "in_progress", "activeForm": "Plotting it"},
                {"content": "Write it up", "status": "pending"},
            ]}),
        ))
        .push(Reply::slow(
            [
                "Plotting", " the", " data", " now", " and", " then", " done.",
            ],
            Duration::from_millis(500),
        ))
        // The list still has open items: one reminder, then the model explains.
        .push(Reply::text("Plotted; the write-up is left for you."));
    fake.send_text(private_chat(77), 77, "plot my data");
    fake.wait_for(WAIT, "the final answer", |f| {
        f.chat_texts(77)
            .iter()
            .any(|t| t == "Plotted; the write-up is left for you.")
    })
    .await;

    let board = "☑ Read the data\n▶ Plotting it\n☐ Write it up";
    let edits = fake.calls_of("editMessageText");
    let with_board: Vec<String> = edits
        .iter()
        .filter_map(|e| e.body["text"].as_str())
        .filter(|t| t.starts_with(board))
        .map(str::to_string)
        .collect();
    assert!(
        !with_board.is_empty(),
        "the status message shows the todo list: {:?}",
        edits
            .iter()
            .map(|e| e.body["text"].clone())
            .collect::<Vec<_>>()
    );
    assert!(
        with_board.iter().any(|t| t.ends_with(" ▉")),
        "the list sits above the streaming answer: {with_board:?}"
    );
    let requests = model.requests();
    assert_eq!(
        requests.len(),
        3,
        "write, stop with open items, one reminder"
    );
    assert!(requests[0]["tools"].to_string().contains("write_todos"));
    assert!(
        requests[2]["messages"]
            .to_string()
            .contains("todo list still has open items"),
        "the reminder reached the model"
    );
    bot.stop().await;
}
