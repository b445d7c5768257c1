use std::io::{Cursor, Write};

use zip::write::SimpleFileOptions;

use super::*;
use antler_store::MemoryStore;

struct Fixture {
    _dir: tempfile::TempDir,
    catalog: SkillCatalog,
    data_dir: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let public = dir.path().join("public");
    for name in ["bootstrap", "research-report"] {
        std::fs::create_dir_all(public.join(name)).unwrap();
        std::fs::write(
            public.join(name).join(SKILL_FILE),
            format!("---\nname: {name}\ndescription: The {name} skill.\n---\n# {name}\n"),
        )
        .unwrap();
    }
    let data_dir = dir.path().join("data");
    let catalog = SkillCatalog::new(
        public,
        data_dir.clone(),
        Arc::new(MemoryStore::new()),
        Arc::new(SkillsLoader::default()),
    );
    Fixture {
        _dir: dir,
        catalog,
        data_dir,
    }
}

/// A catalog over the skills shipped in `skills/public`, with its data dir under `dir`.
pub(crate) fn shipped_catalog(dir: &std::path::Path) -> SkillCatalog {
    SkillCatalog::new(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("skills/public"),
        dir.join("data"),
        Arc::new(MemoryStore::new()),
        Arc::new(SkillsLoader::new()),
    )
}

pub(crate) fn skill_zip(name: &str, allowed_tools: Option<&str>) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = SimpleFileOptions::default();
    writer
        .start_file(format!("{name}/SKILL.md"), options)
        .unwrap();
    let tools = allowed_tools
        .map(|t| format!("allowed-tools: {t}\n"))
        .unwrap_or_default();
    write!(
        writer,
        "---\nname: {name}\ndescription: Custom {name}.\n{tools}---\n# {name}\nDo the {name} thing.\n"
    )
    .unwrap();
    writer
        .start_file(format!("{name}/references/notes.md"), options)
        .unwrap();
    writer.write_all(b"notes").unwrap();
    writer.finish().unwrap().into_inner()
}

#[test]
fn install_list_disable_and_remove_a_custom_skill() {
    let f = fixture();
    let archive = skill_zip("weekly-report", None);
    let installed = f.catalog.install("alice", &archive).unwrap();
    assert_eq!(installed.source, SkillSource::Custom);
    assert_eq!(installed.location, "/mnt/skills/weekly-report/SKILL.md");
    assert_eq!(
        installed.sha256.as_deref(),
        Some(installer::sha256_hex(&archive).as_str())
    );
    let dir = f.data_dir.join("users/alice/skills/custom/weekly-report");
    assert!(dir.join("references/notes.md").is_file());
    // No staging leftovers.
    let leftovers: Vec<_> = std::fs::read_dir(f.data_dir.join("users/alice/skills"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(leftovers, ["custom"]);

    let names = |user: &str| -> Vec<String> {
        f.catalog
            .list(user)
            .unwrap()
            .into_iter()
            .map(|s| s.name)
            .collect()
    };
    assert_eq!(
        names("alice"),
        ["bootstrap", "research-report", "weekly-report"]
    );
    // Custom skills are the owner's alone.
    assert_eq!(names("bob"), ["bootstrap", "research-report"]);

    let disabled = f
        .catalog
        .set_enabled("alice", "weekly-report", false, false)
        .unwrap();
    assert!(!disabled.enabled);
    let enabled: Vec<_> = f
        .catalog
        .enabled("alice")
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(enabled, ["bootstrap", "research-report"]);

    f.catalog.remove("alice", "weekly-report").unwrap();
    assert!(!dir.exists());
    assert!(matches!(
        f.catalog.remove("alice", "weekly-report"),
        Err(SkillError::NotFound { .. })
    ));
}

#[test]
fn name_clashes_and_reserved_names_are_refused() {
    let f = fixture();
    f.catalog
        .install("alice", &skill_zip("notes", None))
        .unwrap();
    let error = f
        .catalog
        .install("alice", &skill_zip("notes", None))
        .unwrap_err();
    assert!(matches!(error, SkillError::Exists { ref name } if name == "notes"));
    assert!(error.to_string().contains("already installed"));
    // A public skill's name is taken too.
    let error = f
        .catalog
        .install("alice", &skill_zip("research-report", None))
        .unwrap_err();
    assert!(matches!(error, SkillError::Exists { .. }), "{error}");
    let error = f
        .catalog
        .install("alice", &skill_zip("help", None))
        .unwrap_err();
    assert!(matches!(error, SkillError::Reserved { .. }), "{error}");
    // Another user may use the name for their own skill.
    f.catalog.install("bob", &skill_zip("notes", None)).unwrap();
}

#[test]
fn public_skills_are_toggled_by_admins_and_never_removed() {
    let f = fixture();
    let error = f
        .catalog
        .set_enabled("alice", "research-report", false, false)
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "only an admin can enable or disable the public skill 'research-report'"
    );
    f.catalog
        .set_enabled("root", "research-report", false, true)
        .unwrap();
    // A public skill's state is everyone's.
    let seen = f.catalog.find("alice", "research-report").unwrap().unwrap();
    assert!(!seen.enabled);
    assert!(matches!(
        f.catalog.remove("root", "research-report"),
        Err(SkillError::PublicReadOnly { .. })
    ));
}

#[test]
fn the_sandbox_mounts_only_enabled_visible_skills() {
    let f = fixture();
    f.catalog
        .install("alice", &skill_zip("weekly-report", None))
        .unwrap();
    f.catalog
        .set_enabled("root", "bootstrap", false, true)
        .unwrap();
    let mounts = SkillMounts::mounts(&f.catalog, "alice");
    let paths: Vec<_> = mounts.iter().map(|m| m.virtual_path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "/mnt/skills",
            "/mnt/skills/research-report",
            "/mnt/skills/weekly-report"
        ]
    );
    assert!(mounts.iter().all(|m| m.read_only));
    let root = &mounts[0].host_path;
    let mut points: Vec<_> = std::fs::read_dir(root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    points.sort();
    assert_eq!(points, ["research-report", "weekly-report"]);
    let bob: Vec<_> = SkillMounts::mounts(&f.catalog, "bob")
        .into_iter()
        .map(|m| m.virtual_path)
        .collect();
    assert_eq!(bob, ["/mnt/skills", "/mnt/skills/research-report"]);
}
