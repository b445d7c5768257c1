use super::*;

fn skill(front: &str) -> String {
    format!("---\n{front}\n---\n# Body\n")
}

#[test]
fn validation_table() {
    let long_name = "a".repeat(65);
    let long_description = "d".repeat(1025);
    let cases: Vec<(String, Result<&str, &str>)> = vec![
        (skill("name: ok\ndescription: Fine."), Ok("ok")),
        (
            skill(&format!("name: {}\ndescription: x", "a".repeat(64))),
            Ok(""),
        ),
        (skill("name: a1-b2-c3\ndescription: x"), Ok("a1-b2-c3")),
        (
            "# no header\n".into(),
            Err(
                "SKILL.md has no front matter; start it with a '---' line, the YAML keys name and description, and another '---' line",
            ),
        ),
        (
            "---\nname: x\n".into(),
            Err(
                "the front matter has no closing '---' line; end the YAML header with a line of three dashes",
            ),
        ),
        (
            skill("- a\n- b"),
            Err("the front matter must be a YAML mapping of keys to values"),
        ),
        (
            skill("name: x\ndescription: d\ntags: [a]"),
            Err(
                "unknown front matter key 'tags'; allowed keys are name, description, license, allowed-tools, metadata, compatibility, version, author",
            ),
        ),
        (
            skill("name: x\ndescription: d\nrequired-secrets: [A]"),
            Err(
                "unknown front matter key 'required-secrets'; allowed keys are name, description, license, allowed-tools, metadata, compatibility, version, author",
            ),
        ),
        (
            skill("description: d"),
            Err("the front matter has no 'name'; add it"),
        ),
        (
            skill("name: x"),
            Err("the front matter has no 'description'; add it"),
        ),
        (
            skill("name: [x]\ndescription: d"),
            Err("'name' must be a string"),
        ),
        (
            skill(&format!("name: {long_name}\ndescription: d")),
            Err("is 65 characters long; use at most 64"),
        ),
        (
            skill("name: My_Skill\ndescription: d"),
            Err("name 'My_Skill' must be hyphen-case: lowercase letters, digits and hyphens only"),
        ),
        (
            skill("name: Upper\ndescription: d"),
            Err("name 'Upper' must be hyphen-case"),
        ),
        (
            skill("name: -lead\ndescription: d"),
            Err("name '-lead' must not start or end with a hyphen or contain '--'"),
        ),
        (
            skill("name: trail-\ndescription: d"),
            Err("name 'trail-' must not start or end with a hyphen or contain '--'"),
        ),
        (
            skill("name: dou--ble\ndescription: d"),
            Err("name 'dou--ble' must not start or end with a hyphen or contain '--'"),
        ),
        (
            skill("name: x\ndescription: \"uses <b>tags</b>\""),
            Err("the description must not contain '<' or '>'; reword it without angle brackets"),
        ),
        (
            skill(&format!("name: x\ndescription: {long_description}")),
            Err("the description is 1025 characters long; shorten it to at most 1024"),
        ),
        (
            skill("name: x\ndescription: \"  \""),
            Err("the description must not be empty; say what the skill does and when to use it"),
        ),
        (
            skill("name: x\ndescription: d\nallowed-tools: {a: 1}"),
            Err(
                "'allowed-tools' must be a list of tool names or one comma- or space-separated string",
            ),
        ),
        (
            skill("name: x\ndescription: d\nmetadata: flat"),
            Err("'metadata' must be a mapping"),
        ),
        (
            skill("name: x\ndescription: d\nlicense: [MIT]"),
            Err("'license' must be a string"),
        ),
        (
            skill("name: x\ndescription: [unclosed"),
            Err("the front matter is not valid YAML"),
        ),
    ];
    for (text, expected) in cases {
        let result = parse_skill_md(&text);
        match (&result, expected) {
            (Ok((meta, _)), Ok(name)) => {
                if !name.is_empty() {
                    assert_eq!(meta.name, name, "{text}");
                }
            }
            (Err(error), Err(message)) => {
                let shown = error.to_string();
                assert!(
                    shown.contains(message),
                    "{text}\n got: {shown}\nwant: {message}"
                );
            }
            _ => panic!("{text}: got {result:?}, want {expected:?}"),
        }
    }
}

#[test]
fn the_body_follows_the_header() {
    let (meta, body) =
        parse_skill_md("---\nname: x\ndescription: d\n---\n# Title\ntext\n").unwrap();
    assert_eq!(meta.description, "d");
    assert_eq!(body, "# Title\ntext\n");
}

#[test]
fn anthropic_format_skills_parse_unchanged() {
    let (pdf, body) = parse_skill_md(include_str!("fixtures/pdf-forms.md")).unwrap();
    assert_eq!(pdf.name, "pdf-forms");
    assert_eq!(
        pdf.license.as_deref(),
        Some("Proprietary. LICENSE.txt has complete terms")
    );
    assert!(body.starts_with("\n# PDF forms"));

    let (review, _) = parse_skill_md(include_str!("fixtures/code-review.md")).unwrap();
    assert_eq!(
        review.allowed_tools.as_deref(),
        Some(&["Read", "Grep", "Glob", "Bash"].map(String::from)[..])
    );
    assert_eq!(review.version.as_deref(), Some("1.2"));
    assert_eq!(review.author.as_deref(), Some("Example Team"));
    assert_eq!(review.metadata.unwrap()["tags"][0], "review");

    let (template, _) = parse_skill_md(include_str!("fixtures/template-skill.md")).unwrap();
    assert_eq!(template.name, "template-skill");
    assert!(template.allowed_tools.is_none());

    let (csv, _) = parse_skill_md(include_str!("fixtures/list-tools.md")).unwrap();
    assert_eq!(csv.name, "csv-summary");
    assert!(csv.description.starts_with("Summarise a CSV file"));
    assert_eq!(
        csv.allowed_tools.as_deref(),
        Some(&["read_file", "bash"].map(String::from)[..])
    );
}

#[test]
fn the_shipped_public_skills_are_valid() {
    let public = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("skills/public");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(public).unwrap() {
        let path = entry.unwrap().path().join("SKILL.md");
        let text = std::fs::read_to_string(&path).unwrap();
        let (meta, _) = parse_skill_md(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        names.push(meta.name);
    }
    names.sort();
    assert_eq!(names, ["bootstrap", "data-analysis", "research-report"]);
}
