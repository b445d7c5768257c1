use std::path::PathBuf;

use super::*;
use crate::skills::SkillSource;

fn skill(name: &str, enabled: bool) -> Skill {
    Skill {
        name: name.to_string(),
        description: format!("{name} skill"),
        source: SkillSource::Public,
        enabled,
        sha256: None,
        location: format!("/mnt/skills/{name}/SKILL.md"),
        allowed_tools: None,
        host_dir: PathBuf::from("/nonexistent"),
        dir_name: name.to_string(),
    }
}

#[test]
fn slash_names_follow_the_reference_pattern() {
    let cases = [
        ("/data-analysis sales.csv", Some("data-analysis")),
        ("/data-analysis", Some("data-analysis")),
        ("/data-analysis\nmore", Some("data-analysis")),
        ("/a1", Some("a1")),
        (" /data-analysis x", None),
        ("/Data x", None),
        ("/data--x y", None),
        ("/-x y", None),
        ("/x- y", None),
        ("/x/y", None),
        ("/", None),
        ("data-analysis", None),
    ];
    for (text, expected) in cases {
        assert_eq!(slash_skill_name(text), expected, "{text:?}");
    }
}

#[test]
fn resolution_table() {
    let visible = vec![
        skill("data-analysis", true),
        skill("old-skill", false),
        skill("help", true),
    ];
    let only_data = vec!["data-analysis".to_string()];
    assert!(matches!(
        resolve("/data-analysis go", &visible, None),
        Activation::Active(s) if s.name == "data-analysis"
    ));
    assert_eq!(
        resolve("/old-skill go", &visible, None),
        Activation::Refused(
            "Skill `/old-skill` is installed but disabled. Enable it before using slash activation."
                .into()
        )
    );
    assert_eq!(
        resolve("/data-analysis go", &visible, Some(&[])),
        Activation::Refused("Skill `/data-analysis` is not available for this agent.".into())
    );
    assert!(matches!(
        resolve("/data-analysis go", &visible, Some(&only_data)),
        Activation::Active(_)
    ));
    // Reserved command names and unknown names are ordinary chat.
    assert_eq!(resolve("/help me", &visible, None), Activation::None);
    assert_eq!(resolve("/unknown x", &visible, None), Activation::None);
    assert_eq!(resolve("hello", &visible, None), Activation::None);
}

#[test]
fn claude_code_tool_names_map_to_antler_tools() {
    let allowed = ["Read".to_string(), "bash".to_string()];
    assert!(tool_allowed(&allowed, "read_file"));
    assert!(tool_allowed(&allowed, "bash"));
    assert!(!tool_allowed(&allowed, "write_file"));
}
