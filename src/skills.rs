//! Skills loader: finds `*/SKILL.md` under the skills directory and reads their front matter
//! (`name`, `description`) into the summaries the system prompt lists.
//!
//! The skills directory is what the sandbox shows read-only at `/mnt/skills`, so a skill in
//! `{skills_dir}/pdf/SKILL.md` is announced at `/mnt/skills/pdf/SKILL.md`. Results are cached per
//! directory and reused while neither the directory nor any listed SKILL.md has a newer mtime:
//! the lead agent is built on every run and must not rescan the disk each time.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::Deserialize;

use crate::agents::SkillSummary;
use crate::config::AppConfig;
use crate::sandbox::VIRTUAL_SKILLS;

/// The file that makes a directory a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// The skill a bootstrap conversation runs with.
pub const BOOTSTRAP_SKILL: &str = "bootstrap";
/// Where skills live when `sandbox.skills_path` is unset (relative to the working directory).
pub const DEFAULT_SKILLS_DIR: &str = "skills/public";

/// The front matter keys Antler reads; anything else (license, allowed-tools, …) is ignored.
#[derive(Debug, Default, Deserialize)]
struct FrontMatter {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

/// The skills directory of a configuration: `sandbox.skills_path`, else `skills/public` in the
/// working directory (the config loader already prefers the one beside the config file).
pub fn skills_dir(config: &AppConfig) -> PathBuf {
    config
        .sandbox
        .skills_path
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_SKILLS_DIR))
}

/// Scans `dir` for `*/SKILL.md`, sorted by name; a missing directory yields no skills and a
/// skill with unreadable front matter is skipped with a warning.
pub fn load_dir(dir: &Path) -> Vec<SkillSummary> {
    scan(dir).0
}

/// Caches the scan of each skills directory until something in it changes.
#[derive(Default)]
pub struct SkillsLoader {
    cache: Mutex<HashMap<PathBuf, CachedScan>>,
}

struct CachedScan {
    dir_mtime: Option<SystemTime>,
    /// Every SKILL.md the scan read, with its mtime then; an edit to one invalidates the scan.
    files: Vec<(PathBuf, Option<SystemTime>)>,
    skills: Arc<Vec<SkillSummary>>,
}

impl SkillsLoader {
    pub fn new() -> Self {
        Self::default()
    }

    /// The skills of `dir`, from the cache while it is fresh.
    pub fn load(&self, dir: &Path) -> Arc<Vec<SkillSummary>> {
        let dir_mtime = mtime(dir);
        {
            let cache = self.lock();
            if let Some(cached) = cache.get(dir)
                && cached.dir_mtime == dir_mtime
                && cached.files.iter().all(|(path, seen)| mtime(path) == *seen)
            {
                return cached.skills.clone();
            }
        }
        // Scan without holding the lock: a concurrent scan of the same dir only costs time.
        let (skills, files) = scan(dir);
        let skills = Arc::new(skills);
        self.lock().insert(
            dir.to_path_buf(),
            CachedScan {
                dir_mtime,
                files,
                skills: skills.clone(),
            },
        );
        skills
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, CachedScan>> {
        // The map only ever holds complete entries, so a poisoned lock is safe to reuse.
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

type SeenFiles = Vec<(PathBuf, Option<SystemTime>)>;

fn scan(dir: &Path) -> (Vec<SkillSummary>, SeenFiles) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Vec::new(), Vec::new()),
        Err(error) => {
            tracing::warn!(%error, dir = %dir.display(), "Cannot read the skills directory; running without skills");
            return (Vec::new(), Vec::new());
        }
    };
    let mut skills = Vec::new();
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let dir_name = entry.file_name().to_string_lossy().into_owned();
        // Hidden directories are editor or VCS leftovers, never skills.
        if dir_name.starts_with('.') {
            continue;
        }
        let path = entry.path().join(SKILL_FILE);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        files.push((path.clone(), mtime(&path)));
        match parse_front_matter(&text) {
            Ok(front) => skills.push(SkillSummary {
                name: front
                    .name
                    .map(|n| n.trim().to_string())
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| dir_name.clone()),
                description: front.description.unwrap_or_default().trim().to_string(),
                path: format!("{VIRTUAL_SKILLS}/{dir_name}/{SKILL_FILE}"),
            }),
            Err(error) => {
                tracing::warn!(%error, path = %path.display(), "Skipping a skill whose front matter cannot be read; fix its YAML header")
            }
        }
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.path.cmp(&b.path)));
    (skills, files)
}

/// Reads the YAML between a leading `---` line and the next `---` line; no front matter means
/// no name or description (the directory name is used).
fn parse_front_matter(text: &str) -> Result<FrontMatter, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return Ok(FrontMatter::default());
    }
    let mut yaml = String::new();
    for line in lines {
        if line.trim_end() == "---" {
            if yaml.trim().is_empty() {
                return Ok(FrontMatter::default());
            }
            return serde_saphyr::from_str(&yaml).map_err(|e| e.to_string());
        }
        yaml.push_str(line);
        yaml.push('\n');
    }
    Err("the front matter has no closing '---' line".to_string())
}

fn mtime(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_skill(root: &Path, dir: &str, text: &str) {
        std::fs::create_dir_all(root.join(dir)).unwrap();
        std::fs::write(root.join(dir).join(SKILL_FILE), text).unwrap();
    }

    #[test]
    fn skills_are_read_from_front_matter_and_sorted_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        write_skill(
            tmp.path(),
            "z-dir",
            "---\nname: alpha\ndescription: \"Does: alpha\"\nlicense: MIT\n---\n# Alpha\n",
        );
        write_skill(tmp.path(), "beta", "# no front matter\n");
        write_skill(tmp.path(), "broken", "---\nname: [unclosed\n---\n");
        write_skill(tmp.path(), ".hidden", "---\nname: hidden\n---\n");
        std::fs::create_dir_all(tmp.path().join("empty")).unwrap();
        let skills = load_dir(tmp.path());
        let names: Vec<_> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["alpha", "beta"]);
        assert_eq!(skills[0].description, "Does: alpha");
        assert_eq!(skills[0].path, "/mnt/skills/z-dir/SKILL.md");
        assert_eq!(skills[1].description, "");
    }

    #[test]
    fn a_missing_directory_has_no_skills() {
        assert!(load_dir(Path::new("/nonexistent/antler-skills")).is_empty());
        assert!(
            SkillsLoader::new()
                .load(Path::new("/nonexistent/x"))
                .is_empty()
        );
    }

    #[test]
    fn the_cache_is_reused_until_a_skill_changes() {
        let tmp = tempfile::tempdir().unwrap();
        write_skill(
            tmp.path(),
            "one",
            "---\nname: one\ndescription: first\n---\n",
        );
        let loader = SkillsLoader::new();
        let first = loader.load(tmp.path());
        assert!(Arc::ptr_eq(&first, &loader.load(tmp.path())));
        // Rewrite with a distinct mtime: some filesystems keep a coarse clock.
        let path = tmp.path().join("one").join(SKILL_FILE);
        std::fs::write(&path, "---\nname: one\ndescription: second\n---\n").unwrap();
        let later = SystemTime::now() + std::time::Duration::from_secs(5);
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(later)
            .unwrap();
        let second = loader.load(tmp.path());
        assert_eq!(second[0].description, "second");
    }

    #[test]
    fn the_shipped_bootstrap_skill_is_found() {
        let skills = load_dir(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("skills/public")
                .as_path(),
        );
        let bootstrap = skills.iter().find(|s| s.name == BOOTSTRAP_SKILL).unwrap();
        assert_eq!(bootstrap.path, "/mnt/skills/bootstrap/SKILL.md");
        assert!(!bootstrap.description.is_empty());
    }
}
