//! The built-in tools on the local provider: limits, exact messages, the read-before-write gate,
//! present_files and the no-host-path guarantee.

use antler::agent_api::Tool;
use antler::config::SandboxConfig;
use antler::sandbox::ExecMode;
use antler::tools::builtin::{
    BashTool, GlobTool, GrepTool, LsTool, ReadFileTool, SandboxAccess, ToolMeta,
};
use antler_store::state::ThreadState;
use serde_json::json;

use super::{Fixture, WS, tools};

fn local_with_bash() -> Fixture {
    let sandbox = SandboxConfig {
        allow_host_bash: true,
        ..Default::default()
    };
    Fixture::with(ExecMode::Local { allow_bash: true }, sandbox, Vec::new())
}

#[tokio::test]
async fn no_tool_output_contains_a_host_path() {
    let fx = local_with_bash();
    let t = tools(&fx);
    let mut state = ThreadState::default();
    let calls: Vec<(&dyn Tool, serde_json::Value)> = vec![
        (
            &t.write,
            json!({"path": format!("{WS}/a.txt"), "content": "alpha\nbeta\n"}),
        ),
        (&t.read, json!({"path": format!("{WS}/a.txt")})),
        (
            &t.replace,
            json!({"path": format!("{WS}/a.txt"), "old_str": "beta", "new_str": "gamma"}),
        ),
        (&t.ls, json!({"path": "/mnt/user-data"})),
        (
            &t.glob,
            json!({"pattern": "**/*", "path": "/mnt/user-data", "include_dirs": true}),
        ),
        (&t.grep, json!({"pattern": "a", "path": "/mnt/user-data"})),
        (
            &t.bash,
            json!({"command": "pwd; echo $HOME; ls -la /mnt/user-data/workspace; realpath a.txt; cat /mnt/user-data/workspace/missing"}),
        ),
        (
            &t.bash,
            json!({"command": "cp a.txt /mnt/user-data/outputs/a.txt && ls /mnt/user-data/outputs"}),
        ),
        (
            &t.present,
            json!({"filepaths": ["/mnt/user-data/outputs/a.txt"]}),
        ),
        (&t.read, json!({"path": format!("{WS}/missing.txt")})),
        (&t.ls, json!({"path": format!("{WS}/nope")})),
        (
            &t.write,
            json!({"path": "/mnt/skills/demo/x", "content": "x"}),
        ),
        (&t.read, json!({"path": "/mnt/skills/demo/SKILL.md"})),
        (&t.grep, json!({"pattern": "(", "path": WS})),
    ];
    let mut outputs = Vec::new();
    for (tool, args) in calls {
        let output = fx.call(tool, args, &mut state).await;
        outputs.push(format!("{}: {}", tool.name(), output.content));
    }
    let all = outputs.join("\n---\n");
    for marker in fx.host_markers() {
        assert!(!all.contains(&marker), "host path {marker} leaked:\n{all}");
    }
    assert!(
        all.contains("/mnt/user-data/workspace\n"),
        "pwd is virtual:\n{all}"
    );
    assert!(all.contains("/mnt/user-data/workspace/a.txt"), "{all}");
    assert!(
        all.contains("File not found: /mnt/user-data/workspace/missing.txt"),
        "{all}"
    );
    assert!(all.contains("/mnt/skills/demo/x is read-only"), "{all}");
    assert!(all.contains("# demo skill"), "{all}");
    assert_eq!(state.artifacts, ["/mnt/user-data/outputs/a.txt"]);
}

#[tokio::test]
async fn bash_output_is_middle_truncated_with_the_exact_skipped_count() {
    let fx = local_with_bash();
    let bash = BashTool::new(
        ToolMeta::new("bash", None),
        SandboxAccess::new(fx.provider_ref()),
        200,
        std::time::Duration::from_secs(60),
    );
    let mut state = ThreadState::default();
    let out = fx
        .call(
            &bash,
            json!({"command": "printf 'H%.0s' $(seq 500); printf 'T%.0s' $(seq 500)"}),
            &mut state,
        )
        .await;
    let marker_len = "\n... [middle truncated: 1000 chars skipped] ...\n".len();
    let kept = 200 - marker_len;
    assert_eq!(
        out.content,
        format!(
            "{}\n... [middle truncated: {} chars skipped] ...\n{}",
            "H".repeat(kept / 2),
            1000 - kept,
            "T".repeat(kept - kept / 2)
        )
    );
    assert!(out.content.chars().count() <= 200);
    let exit = fx
        .call(
            &bash,
            json!({"command": "echo oops >&2; exit 3"}),
            &mut state,
        )
        .await;
    assert_eq!(exit.content, "Std Error:\noops\n\nExit Code: 3");
}

#[tokio::test]
async fn bash_times_out_and_is_disabled_on_plain_local() {
    let fx = local_with_bash();
    let bash = BashTool::new(
        ToolMeta::new("bash", None),
        SandboxAccess::new(fx.provider_ref()),
        20_000,
        std::time::Duration::from_secs(1),
    );
    let mut state = ThreadState::default();
    // The command would run two minutes: an answer within one, however loaded the machine,
    // is the timeout's.
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        fx.call(
            &bash,
            json!({"command": "echo begun; sleep 120"}),
            &mut state,
        ),
    )
    .await
    .expect("the command was killed at its timeout");
    assert!(out.content.starts_with("begun\n"), "{}", out.content);
    assert!(
        out.content
            .contains("Error: Command timed out after 1 seconds and was killed")
    );

    let plain = Fixture::new(ExecMode::Local { allow_bash: false });
    let t = tools(&plain);
    let out = plain
        .call(
            &t.bash,
            json!({"command": "echo hi"}),
            &mut ThreadState::default(),
        )
        .await;
    assert!(
        out.content
            .starts_with("Error: shell commands are disabled"),
        "{}",
        out.content
    );
    assert!(out.content.contains("sandbox.allow_host_bash: true"));
    assert!(out.content.contains("bubblewrap"));
}

#[tokio::test]
async fn read_file_ranges_hints_and_errors() {
    let fx = Fixture::new(ExecMode::Local { allow_bash: false });
    let read = ReadFileTool::new(
        ToolMeta::new("read_file", None),
        SandboxAccess::new(fx.provider_ref()),
        300,
    );
    let paths = fx.paths();
    paths.ensure_dirs().unwrap();
    let body: String = (1..=100).map(|i| format!("line {i}\n")).collect();
    std::fs::write(paths.workspace().join("f.txt"), &body).unwrap();
    std::fs::write(paths.workspace().join("empty.txt"), "").unwrap();
    let mut state = ThreadState::default();
    let path = format!("{WS}/f.txt");

    let ranged = fx
        .call(
            &read,
            json!({"path": path, "start_line": 2, "end_line": 3}),
            &mut state,
        )
        .await;
    assert_eq!(ranged.content, "line 2\nline 3");
    let whole = fx.call(&read, json!({"path": path}), &mut state).await;
    let total = body.chars().count();
    let hint = "Use start_line/end_line to read a specific range";
    let kept = 300
        - format!("\n... [truncated: showing first {total} of {total} chars. {hint}] ...").len();
    assert_eq!(
        whole.content,
        format!(
            "{}\n... [truncated: showing first {kept} of {total} chars. {hint}] ...",
            &body[..kept]
        )
    );
    let zero = fx
        .call(&read, json!({"path": path, "start_line": 0}), &mut state)
        .await;
    assert!(
        zero.content.contains("(start_line must be >= 1)"),
        "{}",
        zero.content
    );
    let reversed = fx
        .call(
            &read,
            json!({"path": path, "start_line": 5, "end_line": 4}),
            &mut state,
        )
        .await;
    assert!(
        reversed
            .content
            .contains("(start_line > end_line — no lines in range)")
    );
    let empty = fx
        .call(
            &read,
            json!({"path": format!("{WS}/empty.txt")}),
            &mut state,
        )
        .await;
    assert_eq!(empty.content, "(empty)");
    for (bad, expected) in [
        ("/etc/passwd", "is outside the sandbox"),
        (
            "/mnt/user-data/workspace/../../../etc/passwd",
            "contains '..'",
        ),
        ("file:///etc/passwd", "file:// URLs are not allowed"),
        (WS, "is a directory"),
    ] {
        let out = fx.call(&read, json!({"path": bad}), &mut state).await;
        assert!(out.content.starts_with("Error: "), "{bad}: {}", out.content);
        assert!(out.content.contains(expected), "{bad}: {}", out.content);
    }
}

#[tokio::test]
async fn ls_glob_and_grep_truncate_with_hints() {
    let fx = Fixture::new(ExecMode::Local { allow_bash: false });
    let paths = fx.paths();
    paths.ensure_dirs().unwrap();
    for i in 0..30 {
        std::fs::write(
            paths.workspace().join(format!("file-{i:02}.md")),
            "needle\nhay\n",
        )
        .unwrap();
    }
    let access = SandboxAccess::new(fx.provider_ref());
    let ls = LsTool::new(ToolMeta::new("ls", None), access.clone(), 250);
    let mut state = ThreadState::default();
    let listing = fx.call(&ls, json!({"path": WS}), &mut state).await;
    let full: String = (0..30)
        .map(|i| format!("{WS}/file-{i:02}.md"))
        .collect::<Vec<_>>()
        .join("\n");
    let total = full.chars().count();
    let hint = "Use a more specific path to see fewer results";
    let kept = 250
        - format!("\n... [truncated: showing first {total} of {total} chars. {hint}] ...").len();
    assert_eq!(
        listing.content,
        format!(
            "{}\n... [truncated: showing first {kept} of {total} chars. {hint}] ...",
            &full[..kept]
        )
    );

    let glob = GlobTool::new(ToolMeta::new("glob", None), access.clone());
    let found = fx
        .call(
            &glob,
            json!({"pattern": "*.md", "path": WS, "max_results": 2}),
            &mut state,
        )
        .await;
    assert!(
        found.content.starts_with(&format!(
            "{WS}/file-00.md\n{WS}/file-01.md\n\nResults truncated. Showing the first 2 matches"
        )),
        "{}",
        found.content
    );
    let none = fx
        .call(&glob, json!({"pattern": "*.rs", "path": WS}), &mut state)
        .await;
    assert_eq!(
        none.content,
        format!("No paths matched pattern \"*.rs\" under {WS}")
    );

    let grep = GrepTool::new(ToolMeta::new("grep", None), access);
    let hits = fx
        .call(
            &grep,
            json!({"pattern": "NEEDLE", "path": WS, "max_results": 1}),
            &mut state,
        )
        .await;
    assert!(
        hits.content.starts_with(&format!(
            "{WS}/file-00.md:1: needle\n\nResults truncated. Showing the first 1 matches"
        )),
        "{}",
        hits.content
    );
    let strict = fx
        .call(
            &grep,
            json!({"pattern": "NEEDLE", "path": WS, "case_sensitive": true}),
            &mut state,
        )
        .await;
    assert_eq!(
        strict.content,
        format!("No matches for \"NEEDLE\" under {WS}")
    );
    let literal = fx
        .call(
            &grep,
            json!({"pattern": "(", "path": WS, "literal": true}),
            &mut state,
        )
        .await;
    assert!(
        literal.content.starts_with("No matches"),
        "{}",
        literal.content
    );
}
