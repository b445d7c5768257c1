//! The files an answer sends to the chat, each once: those `present_files` named, then those
//! its text shows as images or links to (`markdown::for_chat` asks [`AnswerFiles::fate`]).
//! Only regular files inside the thread's outputs are sent, found by their virtual path;
//! nothing else on the host can be reached, and no host path ever reaches the chat.

use std::path::{Component, Path};

use antler_channel::Attachment;

use crate::channels::markdown::{FileFate, FileLink};
use crate::paths::{ThreadPaths, VIRTUAL_OUTPUTS, VIRTUAL_UPLOADS};

/// Picture types the platforms show as photos; any other file (an SVG included) is sent as a
/// document.
const PHOTO_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The answer's files, as they are found.
pub(crate) struct AnswerFiles<'a> {
    paths: &'a ThreadPaths,
    /// In the order found, no file twice.
    pub(crate) attachments: Vec<Attachment>,
    /// Names of presented paths that are not files of the outputs.
    pub(crate) unresolved: Vec<String>,
}

impl<'a> AnswerFiles<'a> {
    /// Starts with the files `present_files` named (virtual paths).
    pub(crate) fn presented(paths: &'a ThreadPaths, virtual_paths: &[String]) -> Self {
        let mut files = Self {
            paths,
            attachments: Vec::new(),
            unresolved: Vec::new(),
        };
        for virtual_path in virtual_paths {
            match resolve_output(&paths.outputs(), virtual_path) {
                Ok(attachment) => files.add(attachment),
                Err(_) => files.unresolved.push(file_name(virtual_path)),
            }
        }
        files
    }

    /// Resolves a file the answer's text shows or links to, adding it to the attachments the
    /// first time.
    pub(crate) fn fate(&mut self, link: &FileLink) -> FileFate {
        if within(&link.path, VIRTUAL_UPLOADS).is_some() {
            let uploads = self.paths.uploads();
            return match resolve_in(&uploads, &link.path, VIRTUAL_UPLOADS) {
                Ok(_) => FileFate::Upload,
                Err(fate) => fate,
            };
        }
        match resolve_output(&self.paths.outputs(), &link.path) {
            Ok(attachment) => {
                self.add(attachment);
                FileFate::Attached
            }
            Err(fate) => fate,
        }
    }

    fn add(&mut self, attachment: Attachment) {
        if !self.attachments.iter().any(|a| a.path == attachment.path) {
            self.attachments.push(attachment);
        }
    }
}

/// The file `virtual_path` names in `outputs`, or why there is none.
fn resolve_output(outputs: &Path, virtual_path: &str) -> Result<Attachment, FileFate> {
    let path = resolve_in(outputs, virtual_path, VIRTUAL_OUTPUTS)?;
    let metadata = std::fs::metadata(&path).map_err(|_| FileFate::Missing)?;
    let mime_type = mime_guess::from_path(&path)
        .first_or_octet_stream()
        .essence_str()
        .to_string();
    Ok(Attachment {
        filename: file_name(virtual_path),
        is_image: PHOTO_TYPES.contains(&mime_type.as_str()),
        mime_type,
        path,
        size: metadata.len(),
        voice: false,
    })
}

/// The canonical host path of the regular file `virtual_path` names under `root` (mounted at
/// `virtual_root`): `Outside` when the path is not under it, has `..`, or is a symlink leading
/// out; `Missing` when there is no such file.
fn resolve_in(
    root: &Path,
    virtual_path: &str,
    virtual_root: &str,
) -> Result<std::path::PathBuf, FileFate> {
    let relative = Path::new(within(virtual_path, virtual_root).ok_or(FileFate::Outside)?);
    if relative.as_os_str().is_empty()
        || relative
            .components()
            .any(|c| !matches!(c, Component::Normal(_)))
    {
        return Err(FileFate::Outside);
    }
    let path = root.join(relative);
    let metadata = std::fs::symlink_metadata(&path).map_err(|_| FileFate::Missing)?;
    if metadata.is_symlink() {
        return Err(FileFate::Outside);
    }
    if !metadata.is_file() {
        return Err(FileFate::Missing);
    }
    let canonical = path.canonicalize().map_err(|_| FileFate::Missing)?;
    let canonical_root = root.canonicalize().map_err(|_| FileFate::Missing)?;
    if !canonical.starts_with(canonical_root) {
        return Err(FileFate::Outside);
    }
    Ok(canonical)
}

/// The part of `path` below `root` (`/mnt/user-data/outputs/a/b.png` → `a/b.png`).
fn within<'p>(path: &'p str, root: &str) -> Option<&'p str> {
    path.strip_prefix(root)?.strip_prefix('/')
}

fn file_name(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channels::markdown::for_chat;

    fn thread() -> (tempfile::TempDir, ThreadPaths) {
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = ThreadPaths::new(dir.path(), "u1", "t1").expect("paths");
        paths.ensure_dirs().expect("dirs");
        std::fs::write(paths.outputs().join("chart.png"), b"png").expect("write");
        std::fs::write(paths.outputs().join("report.pdf"), b"pdf").expect("write");
        std::fs::write(paths.outputs().join("plot.svg"), b"<svg/>").expect("write");
        std::fs::write(paths.uploads().join("cat.jpg"), b"jpg").expect("write");
        std::fs::write(dir.path().join("secret.txt"), b"no").expect("write");
        (dir, paths)
    }

    #[test]
    fn only_real_files_inside_outputs_are_presented() {
        let (dir, paths) = thread();
        std::os::unix::fs::symlink(
            dir.path().join("secret.txt"),
            paths.outputs().join("link.txt"),
        )
        .expect("symlink");
        let files = AnswerFiles::presented(
            &paths,
            &[
                "/mnt/user-data/outputs/chart.png".into(),
                "/mnt/user-data/outputs/report.pdf".into(),
                "/mnt/user-data/outputs/chart.png".into(),
                "/mnt/user-data/outputs/../../../../secret.txt".into(),
                "/mnt/user-data/outputs/link.txt".into(),
                "/mnt/user-data/outputs/missing.txt".into(),
                "/mnt/user-data/outputsx/chart.png".into(),
                "/etc/passwd".into(),
            ],
        );
        let names: Vec<&str> = files
            .attachments
            .iter()
            .map(|a| a.filename.as_str())
            .collect();
        assert_eq!(names, ["chart.png", "report.pdf"]);
        assert!(files.attachments[0].is_image);
        assert_eq!(files.attachments[0].mime_type, "image/png");
        assert!(!files.attachments[1].is_image);
        assert_eq!(
            files.unresolved,
            [
                "secret.txt",
                "link.txt",
                "missing.txt",
                "chart.png",
                "passwd"
            ]
        );
    }

    #[test]
    fn an_answer_attaches_what_it_shows_once_and_says_what_it_cannot_send() {
        let (_dir, paths) = thread();
        let mut files =
            AnswerFiles::presented(&paths, &["/mnt/user-data/outputs/chart.png".into()]);
        let text = for_chat(
            "![Sales](/mnt/user-data/outputs/chart.png)\n\
             [the report](/mnt/user-data/outputs/report.pdf), [again](/mnt/user-data/outputs/report.pdf)\n\
             ![plot](/mnt/user-data/outputs/plot.svg)\n\
             ![your cat](/mnt/user-data/uploads/cat.jpg)\n\
             ![gone](/mnt/user-data/outputs/gone.png)\n\
             ![escape](/mnt/user-data/outputs/../../../../secret.txt)\n\
             ![host](/etc/hostname)",
            |link| files.fate(link),
        );
        assert_eq!(
            text,
            "Sales (📎 chart.png)\n\
             the report (📎 report.pdf), again (📎 report.pdf)\n\
             📎 plot.svg\n\
             your cat (cat.jpg, sent earlier in this chat)\n\
             gone.png (not attached, the file does not exist)\n\
             escape (secret.txt: not attached, only files in /mnt/user-data/outputs can be sent)\n\
             host (hostname: not attached, only files in /mnt/user-data/outputs can be sent)"
        );
        let sent: Vec<(&str, bool)> = files
            .attachments
            .iter()
            .map(|a| (a.filename.as_str(), a.is_image))
            .collect();
        assert_eq!(
            sent,
            [
                ("chart.png", true),
                ("report.pdf", false),
                ("plot.svg", false)
            ],
            "each file once; an SVG goes as a document"
        );
        assert!(!text.contains(&*paths.outputs().to_string_lossy()));
    }
}
