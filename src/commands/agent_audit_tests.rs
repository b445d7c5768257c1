//! Version numbers as typed, the history lines, and a long diff split into whole code blocks.

use chrono::{TimeZone, Utc};

use super::*;

#[test]
fn version_numbers_are_read_as_typed() {
    let cases = [
        ("3", Some("000003")),
        ("#12", Some("000012")),
        ("000007", Some("000007")),
        (" 4 ", Some("000004")),
        ("", None),
        ("#", None),
        ("-1", None),
        ("+1", None),
        ("two", None),
        ("1.5", None),
    ];
    for (text, expected) in cases {
        assert_eq!(version_id(text).as_deref(), expected, "{text:?}");
    }
}

#[test]
fn history_lines_show_the_author_or_unknown() {
    let at = Utc.with_ymd_and_hms(2026, 12, 6, 10, 31, 0).unwrap();
    let written = VersionInfo {
        id: "000002".into(),
        created_at: at,
        soul_sha256: None,
        config_sha256: None,
        author: Some(VersionAuthor::UpdateAgent {
            run_id: "run-9".into(),
            user_id: "ann".into(),
        }),
        written_at: Some(at),
        summary: Some("SOUL.md +1/−1 lines".into()),
    };
    assert_eq!(
        history_line(&written, true),
        "#2 (current) · 2026-12-06 10:31 UTC · update_agent in run run-9 (for ann) · SOUL.md +1/−1 lines"
    );
    // A version archived before authors were recorded.
    let old = VersionInfo {
        id: "000001".into(),
        author: None,
        written_at: None,
        summary: None,
        ..written
    };
    assert_eq!(
        history_line(&old, false),
        "#1 · replaced 2026-12-06 10:31 UTC · unknown · change not known"
    );
}

#[test]
fn a_long_diff_is_split_into_numbered_code_blocks_within_the_limit() {
    let diff: String = (0..300)
        .map(|i| format!("+line {i} of the new soul\n"))
        .collect();
    let title = "helper: version 1 → current, #2";
    let parts = chunk_diff(title, &diff, Some(2000));
    assert!(parts.len() > 1, "{}", parts.len());
    let count = parts.len();
    let mut lines = Vec::new();
    for (idx, part) in parts.iter().enumerate() {
        assert!(part.chars().count() <= 2000, "part {idx} too long");
        let head = format!("{title} ({}/{count})\n```diff\n", idx + 1);
        let body = part
            .strip_prefix(&head)
            .and_then(|rest| rest.strip_suffix("\n```"))
            .unwrap_or_else(|| panic!("part {idx} is not a whole block: {part}"));
        lines.extend(body.lines().map(str::to_string));
    }
    // Every line once, in order, none cut.
    let expected: Vec<String> = diff.lines().map(str::to_string).collect();
    assert_eq!(lines, expected);

    // A short diff, or a surface without a limit: one block without a counter.
    assert_eq!(
        chunk_diff("t", "-a\n+b\n", None),
        ["t\n```diff\n-a\n+b\n```"]
    );
    assert_eq!(chunk_diff("t", &diff, None).len(), 1);
}

#[test]
fn a_line_longer_than_a_message_is_cut_and_fences_in_the_files_are_broken() {
    let long = format!("+{}", "x".repeat(900));
    let parts = chunk_diff("t", &format!("{long}\n+```rust\n"), Some(300));
    assert!(parts.iter().all(|p| p.chars().count() <= 300));
    let joined: String = parts
        .iter()
        .map(|p| {
            p.split_once("```diff\n")
                .and_then(|(_, rest)| rest.strip_suffix("\n```"))
                .unwrap_or_default()
                .replace('\n', "")
        })
        .collect();
    assert_eq!(joined, format!("{long}+``\u{200B}`rust"));
}
