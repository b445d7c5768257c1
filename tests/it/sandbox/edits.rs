//! The editing tools on the local provider: the write_file size cap, str_replace semantics, the
//! read-before-write gate, present_files and the registry's typed schemas.

use std::sync::Arc;

use antler::agent_api::ToolRef;
use antler::config::{AppConfig, ToolConfig};
use antler::sandbox::ExecMode;
use antler::tools::builtin::PresentFilesTool;
use antler::tools::registry::ToolRegistry;
use antler_store::state::ThreadState;
use serde_json::json;

use super::{Fixture, WS, tools};

#[tokio::test]
async fn write_file_caps_non_append_payloads_at_80_kib() {
    let fx = Fixture::new(ExecMode::Local { allow_bash: false });
    let t = tools(&fx);
    let mut state = ThreadState::default();
    let too_big = "x".repeat(80 * 1024 + 1);
    let refused = fx
        .call(
            &t.write,
            json!({"path": format!("{WS}/big"), "content": too_big}),
            &mut state,
        )
        .await;
    assert!(
        refused
            .content
            .starts_with("Error: content is 81921 bytes, over the 81920-byte limit"),
        "{}",
        refused.content
    );
    assert!(refused.content.contains("append=true"));
    assert!(!fx.paths().workspace().join("big").exists());
    let exact = fx
        .call(
            &t.write,
            json!({"path": format!("{WS}/big"), "content": "x".repeat(80 * 1024)}),
            &mut state,
        )
        .await;
    assert_eq!(exact.content, "OK");
    let appended = fx
        .call(
            &t.write,
            json!({"path": format!("{WS}/big"), "content": too_big, "append": true}),
            &mut state,
        )
        .await;
    assert_eq!(appended.content, "OK", "append bypasses the cap");
    let size = std::fs::metadata(fx.paths().workspace().join("big"))
        .unwrap()
        .len();
    assert_eq!(size, 2 * 80 * 1024 + 1);

    let uncapped = Fixture::new(ExecMode::Local { allow_bash: false });
    let mut config = (*uncapped.config).clone();
    config.sandbox.write_file_max_bytes = 0;
    let uncapped = Fixture {
        config: Arc::new(config),
        ..uncapped
    };
    let t = tools(&uncapped);
    let out = uncapped
        .call(
            &t.write,
            json!({"path": format!("{WS}/big2"), "content": "y".repeat(200_000)}),
            &mut ThreadState::default(),
        )
        .await;
    assert_eq!(out.content, "OK", "0 disables the cap");
}

#[tokio::test]
async fn str_replace_semantics() {
    let fx = Fixture::new(ExecMode::Local { allow_bash: false });
    let t = tools(&fx);
    let mut state = ThreadState::default();
    let path = format!("{WS}/s.txt");
    let missing = fx
        .call(
            &t.replace,
            json!({"path": format!("{WS}/none.txt"), "old_str": "a", "new_str": "b"}),
            &mut state,
        )
        .await;
    assert_eq!(
        missing.content,
        format!("Error: File not found: {WS}/none.txt")
    );

    fx.call(
        &t.write,
        json!({"path": format!("{WS}/empty.txt"), "content": ""}),
        &mut state,
    )
    .await;
    let noop = fx
        .call(
            &t.replace,
            json!({"path": format!("{WS}/empty.txt"), "old_str": "", "new_str": "x"}),
            &mut state,
        )
        .await;
    assert_eq!(noop.content, "OK");
    assert_eq!(
        std::fs::read_to_string(fx.paths().workspace().join("empty.txt")).unwrap(),
        ""
    );
    let on_empty = fx
        .call(
            &t.replace,
            json!({"path": format!("{WS}/empty.txt"), "old_str": "a", "new_str": "b"}),
            &mut state,
        )
        .await;
    assert_eq!(
        on_empty.content,
        format!("Error: String to replace not found in file: {WS}/empty.txt")
    );

    fx.call(
        &t.write,
        json!({"path": path, "content": "one two two"}),
        &mut state,
    )
    .await;
    let not_found = fx
        .call(
            &t.replace,
            json!({"path": path, "old_str": "three", "new_str": "3"}),
            &mut state,
        )
        .await;
    assert_eq!(
        not_found.content,
        format!("Error: String to replace not found in file: {path}")
    );
    let ambiguous = fx
        .call(
            &t.replace,
            json!({"path": path, "old_str": "two", "new_str": "2"}),
            &mut state,
        )
        .await;
    assert!(
        ambiguous.content.starts_with(&format!(
            "Error: String to replace occurs 2 times in file: {path}"
        )),
        "{}",
        ambiguous.content
    );
    let single = fx
        .call(
            &t.replace,
            json!({"path": path, "old_str": "one", "new_str": "1"}),
            &mut state,
        )
        .await;
    assert_eq!(single.content, "OK");
    let all = fx
        .call(
            &t.replace,
            json!({"path": path, "old_str": "two", "new_str": "2", "replace_all": true}),
            &mut state,
        )
        .await;
    assert_eq!(all.content, "OK");
    assert_eq!(
        std::fs::read_to_string(fx.paths().workspace().join("s.txt")).unwrap(),
        "1 2 2"
    );
}

#[tokio::test]
async fn overwriting_requires_a_current_read() {
    let fx = Fixture::new(ExecMode::Local { allow_bash: false });
    let t = tools(&fx);
    let paths = fx.paths();
    paths.ensure_dirs().unwrap();
    std::fs::write(paths.workspace().join("doc.md"), "original").unwrap();
    let path = format!("{WS}/doc.md");
    let mut state = ThreadState::default();

    for args in [
        json!({"path": path, "content": "new"}),
        json!({"path": path, "content": "more", "append": true}),
    ] {
        let refused = fx.call(&t.write, args, &mut state).await;
        assert_eq!(
            refused.content,
            format!(
                "Error: {path} already exists and has not been read in this thread. Call read_file on it first, then retry the edit."
            )
        );
    }
    let refused = fx
        .call(
            &t.replace,
            json!({"path": path, "old_str": "original", "new_str": "x"}),
            &mut state,
        )
        .await;
    assert!(
        refused.content.contains("has not been read"),
        "{}",
        refused.content
    );
    assert_eq!(
        std::fs::read_to_string(paths.workspace().join("doc.md")).unwrap(),
        "original"
    );

    fx.call(
        &t.read,
        json!({"path": "/mnt/user-data//workspace/./doc.md", "start_line": 1, "end_line": 1}),
        &mut state,
    )
    .await;
    assert_eq!(
        fx.call(&t.write, json!({"path": path, "content": "v2"}), &mut state)
            .await
            .content,
        "OK"
    );
    assert_eq!(
        fx.call(
            &t.write,
            json!({"path": path, "content": "+", "append": true}),
            &mut state
        )
        .await
        .content,
        "OK",
        "own writes keep the stamp current"
    );
    assert_eq!(
        fx.call(
            &t.replace,
            json!({"path": path, "old_str": "v2+", "new_str": "v3"}),
            &mut state
        )
        .await
        .content,
        "OK"
    );

    std::fs::write(
        paths.workspace().join("doc.md"),
        "changed behind the agent's back",
    )
    .unwrap();
    let stale = fx
        .call(&t.write, json!({"path": path, "content": "v4"}), &mut state)
        .await;
    assert!(
        stale.content.contains("changed since you last read it"),
        "{}",
        stale.content
    );
    let fresh = fx
        .call(
            &t.write,
            json!({"path": format!("{WS}/brand-new.md"), "content": "hi"}),
            &mut state,
        )
        .await;
    assert_eq!(fresh.content, "OK", "new files need no read");
}

#[tokio::test]
async fn present_files_accepts_only_outputs() {
    let fx = Fixture::new(ExecMode::Local { allow_bash: false });
    let paths = fx.paths();
    paths.ensure_dirs().unwrap();
    std::fs::write(paths.outputs().join("report.md"), "r").unwrap();
    std::fs::write(paths.workspace().join("draft.md"), "d").unwrap();
    std::os::unix::fs::symlink(
        paths.workspace().join("draft.md"),
        paths.outputs().join("sneaky.md"),
    )
    .unwrap();
    let present = PresentFilesTool::new(fx.config.data_dir());
    let mut state = ThreadState::default();
    for bad in [
        "/mnt/user-data/workspace/draft.md",
        "/mnt/user-data/outputs/../workspace/draft.md",
        "/mnt/user-data/outputs",
        "/mnt/user-data/outputsX/a",
        "/mnt/user-data/outputs/sneaky.md",
    ] {
        let out = fx
            .call(
                &present,
                json!({"filepaths": ["/mnt/user-data/outputs/report.md", bad]}),
                &mut state,
            )
            .await;
        assert_eq!(
            out.content,
            format!("Error: Only files in /mnt/user-data/outputs can be presented: {bad}")
        );
        assert!(
            out.update.artifacts.is_empty(),
            "{bad}: the whole call fails"
        );
    }
    assert!(state.artifacts.is_empty());
    let host_path = paths.outputs().join("report.md");
    let ok = fx.call(&present, json!({"filepaths": ["/mnt/user-data/outputs/./report.md", host_path.to_string_lossy()]}), &mut state).await;
    assert_eq!(ok.content, "Successfully presented files");
    assert_eq!(state.artifacts, ["/mnt/user-data/outputs/report.md"]);
}

#[tokio::test]
async fn tools_acquire_lazily_and_registry_schemas_are_typed() {
    let fx = Fixture::new(ExecMode::Local { allow_bash: false });
    let t = tools(&fx);
    let mut state = ThreadState::default();
    fx.call(&t.ls, json!({"path": WS}), &mut state).await;
    assert_eq!(
        state.sandbox.as_ref().unwrap().sandbox_id,
        "local:alice:thread-1"
    );

    let config = AppConfig {
        tools: vec![ToolConfig {
            name: "read_file".into(),
            group: Some("file:read".into()),
            use_kind: "read_file".into(),
            params: Default::default(),
        }],
        ..Default::default()
    };
    let registry = ToolRegistry::from_config(&config, fx.provider_ref()).unwrap();
    let names: Vec<&str> = registry.all().iter().map(|t: &ToolRef| t.name()).collect();
    assert_eq!(names, ["read_file", "present_files"]);
    let schema = registry.all()[0].parameters();
    assert_eq!(schema["required"], json!(["path"]));
    assert!(schema["properties"]["start_line"].is_object());
    assert!(
        schema["properties"]["description"]["description"]
            .as_str()
            .unwrap()
            .contains("ALWAYS PROVIDE")
    );
}
