//! The model's Markdown as a chat shows it, before each platform's converter
//! (`channels/<platform>/markup`) turns it into its own markup: `[citation:Title](URL)` becomes
//! a plain link titled Title, an image or a link pointing at a file becomes a mention of the file
//! the answer sends (or of why it sends none), and an image from the web becomes a link to it.
//! Done here once, so every platform gets the same text; code is left as written.

use std::ops::Range;

use antler_channel::map_prose;
use percent_encoding::percent_decode_str;

use crate::paths::VIRTUAL_OUTPUTS;

/// The label prefix of a citation, as the system prompt asks for it.
const CITATION: &str = "citation:";

/// A Markdown image, or a link, whose target is a file path rather than a URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileLink {
    /// The alt text or the link's text, as written.
    pub(crate) label: String,
    /// The path as written, percent-decoded, without a `sandbox:` or `file://` prefix.
    pub(crate) path: String,
    pub(crate) image: bool,
}

impl FileLink {
    /// The file's name: the path's last segment.
    pub(crate) fn name(&self) -> &str {
        self.path
            .rsplit('/')
            .find(|segment| !segment.is_empty())
            .unwrap_or(&self.path)
    }
}

/// What became of a file the answer shows or links to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FileFate {
    /// Sent with the answer.
    Attached,
    /// A file someone sent to this conversation: it is in the chat already.
    Upload,
    /// No such file.
    Missing,
    /// Not a file an answer may send (outside the thread's outputs).
    Outside,
    /// Not known yet: the answer is still streaming.
    Pending,
}

/// `markdown` with citations as plain links, web images as links, and each image or link
/// naming a file replaced by a mention saying what `fate` did with it.
pub(crate) fn for_chat(markdown: &str, mut fate: impl FnMut(&FileLink) -> FileFate) -> String {
    map_prose(markdown, |prose| rewrite_prose(prose, &mut fate))
}

/// The links and images of a piece of text without code.
fn rewrite_prose(text: &str, fate: &mut impl FnMut(&FileLink) -> FileFate) -> String {
    let mut out = String::with_capacity(text.len() + 32);
    let mut copied = 0;
    let mut at = 0;
    while let Some(offset) = text[at..].find('[') {
        let open = at + offset;
        at = open + 1;
        if escaped(text, open) {
            continue;
        }
        let Some(link) = InlineLink::parse(text, open) else {
            continue;
        };
        let image = open > 0 && text.as_bytes()[open - 1] == b'!' && !escaped(text, open - 1);
        let start = if image { open - 1 } else { open };
        // A link or image kept as written may hold one to rewrite (`[![alt](…)](…)`).
        if let Some(replacement) = link.rewrite(text, image, fate) {
            out.push_str(&text[copied..start]);
            out.push_str(&replacement);
            copied = link.end;
            at = link.end;
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// An inline link's parts: `[label](destination "title")`.
struct InlineLink {
    /// The label's source, between the brackets.
    label: Range<usize>,
    /// The destination, backslash escapes resolved.
    dest: String,
    /// Just past the closing parenthesis.
    end: usize,
}

impl InlineLink {
    /// The link whose label opens at `open` (a `[`), as CommonMark reads inline links: a
    /// label with balanced brackets, then at once `(`, a destination (`<…>`, or without spaces
    /// and with balanced parentheses), an optional title, and `)`.
    fn parse(text: &str, open: usize) -> Option<Self> {
        let label_end = closing(text, open + 1, '[', ']')?;
        let mut rest = text[label_end + 1..].strip_prefix('(')?;
        rest = rest.trim_start_matches([' ', '\t']);
        rest = rest.strip_prefix('\n').unwrap_or(rest);
        let (dest, after) = if let Some(bracketed) = rest.strip_prefix('<') {
            let close = bracketed.find(['>', '\n'])?;
            (&bracketed[..close], bracketed[close..].strip_prefix('>')?)
        } else {
            let len = destination_len(rest)?;
            (&rest[..len], &rest[len..])
        };
        let after = skip_title(after.trim_start())?.trim_start();
        let after = after.strip_prefix(')')?;
        Some(Self {
            label: open + 1..label_end,
            dest: unescape(dest),
            end: text.len() - after.len(),
        })
    }

    /// What the chat reads instead, or `None` to keep the link as written.
    fn rewrite(
        &self,
        text: &str,
        image: bool,
        fate: &mut impl FnMut(&FileLink) -> FileFate,
    ) -> Option<String> {
        let label = unescape(text[self.label.clone()].trim());
        if let Some(path) = file_path(&self.dest, image) {
            let link = FileLink {
                label: strip_citation(&label).to_string(),
                path,
                image,
            };
            return Some(mention(&link, fate(&link)));
        }
        let url = url_for_chat(&self.dest);
        if image {
            let alt = bracket_free(non_empty(&label, "image"));
            return Some(format!("[{alt}]({url})"));
        }
        if !starts_with_citation(&label) {
            return None;
        }
        // The title keeps its own Markdown (emphasis), as written.
        let title = strip_citation(text[self.label.clone()].trim());
        Some(format!("[{}]({url})", non_empty(title, &self.dest)))
    }
}

/// Where the `close` matching an already open `open` is, from `from` on: brackets nest,
/// backslash escapes count, a blank line ends the search.
fn closing(text: &str, from: usize, open: char, close: char) -> Option<usize> {
    let mut depth = 0usize;
    let mut chars = text[from..].char_indices();
    while let Some((idx, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '\n' if text[from + idx + 1..]
                .trim_start_matches([' ', '\t'])
                .starts_with('\n') =>
            {
                return None;
            }
            c if c == open => depth += 1,
            c if c == close && depth == 0 => return Some(from + idx),
            c if c == close => depth -= 1,
            _ => {}
        }
    }
    None
}

/// The length of a destination written without `<…>`: up to a space or an unbalanced `)`.
fn destination_len(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut chars = text.char_indices();
    while let Some((idx, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '(' => depth += 1,
            ')' if depth == 0 => return Some(idx),
            ')' => depth -= 1,
            c if c.is_whitespace() => return (depth == 0).then_some(idx),
            _ => {}
        }
    }
    None
}

/// The text after an optional link title (`"…"`, `'…'` or `(…)`).
fn skip_title(text: &str) -> Option<&str> {
    let closer = match text.chars().next() {
        Some('"') => '"',
        Some('\'') => '\'',
        Some('(') => ')',
        _ => return Some(text),
    };
    let mut chars = text.char_indices().skip(1);
    while let Some((idx, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            c if c == closer => return Some(&text[idx + 1..]),
            _ => {}
        }
    }
    None
}

/// Whether the character at `idx` is escaped by an odd number of backslashes.
fn escaped(text: &str, idx: usize) -> bool {
    text.as_bytes()[..idx]
        .iter()
        .rev()
        .take_while(|b| **b == b'\\')
        .count()
        % 2
        == 1
}

/// `text` with backslash escapes of ASCII punctuation resolved.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(next) = chars.peek().filter(|n| n.is_ascii_punctuation())
        {
            out.push(*next);
            chars.next();
        } else {
            out.push(c);
        }
    }
    out
}

fn starts_with_citation(text: &str) -> bool {
    text.trim_start()
        .get(..CITATION.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(CITATION))
}

/// `text` without a leading `citation:` (any case, spaces around it trimmed).
fn strip_citation(text: &str) -> &str {
    if starts_with_citation(text) {
        text.trim_start()[CITATION.len()..].trim_start()
    } else {
        text
    }
}

/// The file path a link or image points at, or `None` for a URL (or, for a link, a relative
/// target, which may be anything). `sandbox:` and `file://` prefixes are dropped.
fn file_path(dest: &str, image: bool) -> Option<String> {
    let dest = dest.trim();
    let path = if let Some(rest) = strip_prefix_ignore_case(dest, "sandbox:") {
        rest
    } else if let Some(rest) = strip_prefix_ignore_case(dest, "file://") {
        rest
    } else if has_scheme(dest)
        || dest.is_empty()
        || dest.starts_with(['#', '?'])
        || dest.starts_with("//")
        || (!image && !dest.starts_with('/'))
    {
        return None;
    } else {
        dest
    };
    Some(percent_decode_str(path).decode_utf8_lossy().into_owned())
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

/// Whether `dest` starts with a URL scheme (`https:`, `mailto:`, …).
fn has_scheme(dest: &str) -> bool {
    let Some((scheme, _)) = dest.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
}

/// A URL every platform's converter reads whole: the characters that would end or break a
/// Markdown link target percent-encoded.
fn url_for_chat(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    for c in url.trim().chars() {
        match c {
            ' ' => out.push_str("%20"),
            '"' => out.push_str("%22"),
            '(' => out.push_str("%28"),
            ')' => out.push_str("%29"),
            '<' => out.push_str("%3C"),
            '>' => out.push_str("%3E"),
            '|' => out.push_str("%7C"),
            c => out.push(c),
        }
    }
    out
}

fn non_empty<'a>(text: &'a str, fallback: &'a str) -> &'a str {
    if text.trim().is_empty() {
        fallback
    } else {
        text
    }
}

/// A plain-text label that cannot close the link it is put in.
fn bracket_free(text: &str) -> String {
    text.replace('[', "(").replace(']', ")")
}

/// What the chat reads where the answer showed or linked to a file.
fn mention(link: &FileLink, fate: FileFate) -> String {
    let name = link.name();
    let label = link.label.trim();
    let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
    let named = !label.is_empty() && label != name && label != stem;
    let why = match fate {
        FileFate::Attached => return attached(named.then_some(label), name),
        FileFate::Pending if named => return format!("{label} ({name})"),
        FileFate::Pending => return name.to_string(),
        FileFate::Upload => "sent earlier in this chat".to_string(),
        FileFate::Missing => "not attached, the file does not exist".to_string(),
        FileFate::Outside => format!("not attached, only files in {VIRTUAL_OUTPUTS} can be sent"),
    };
    let separator = if fate == FileFate::Upload { ", " } else { ": " };
    if named {
        format!("{label} ({name}{separator}{why})")
    } else {
        format!("{name} ({why})")
    }
}

fn attached(label: Option<&str>, name: &str) -> String {
    match label {
        Some(label) => format!("{label} (📎 {name})"),
        None => format!("📎 {name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Files under outputs are attached unless named `missing*`; uploads are uploads; the rest
    /// is outside.
    fn fate(link: &FileLink) -> FileFate {
        if link.path.starts_with("/mnt/user-data/uploads/") {
            FileFate::Upload
        } else if !link.path.starts_with("/mnt/user-data/outputs/") {
            FileFate::Outside
        } else if link.name().starts_with("missing") {
            FileFate::Missing
        } else {
            FileFate::Attached
        }
    }

    #[test]
    fn table_of_conversions() {
        let cases = [
            ("plain **text**", "plain **text**"),
            (
                "Sales rose [citation:Q3 report](https://x.test/q3).",
                "Sales rose [Q3 report](https://x.test/q3).",
            ),
            (
                "[Citation: *The* Times](https://x.test/a_(b) \"t\")",
                "[*The* Times](https://x.test/a_%28b%29)",
            ),
            (
                "[citation:](<https://x.test/a b>)",
                "[https://x.test/a b](https://x.test/a%20b)",
            ),
            ("[docs](https://x.test/docs)", "[docs](https://x.test/docs)"),
            ("<https://x.test/auto>", "<https://x.test/auto>"),
            (
                "`[citation:T](https://x.test)` stays",
                "`[citation:T](https://x.test)` stays",
            ),
            (
                "```\n![c](/mnt/user-data/outputs/c.png)\n```",
                "```\n![c](/mnt/user-data/outputs/c.png)\n```",
            ),
            (
                "![Sales by month](/mnt/user-data/outputs/chart.png)",
                "Sales by month (📎 chart.png)",
            ),
            ("![chart](/mnt/user-data/outputs/chart.png)", "📎 chart.png"),
            (
                "![](sandbox:/mnt/user-data/outputs/chart.png)",
                "📎 chart.png",
            ),
            (
                "see [the report](/mnt/user-data/outputs/my%20report.pdf)",
                "see the report (📎 my report.pdf)",
            ),
            (
                "![a](file:///mnt/user-data/outputs/missing.png)",
                "a (missing.png: not attached, the file does not exist)",
            ),
            (
                "![plot](/mnt/user-data/workspace/plot.png)",
                "plot.png (not attached, only files in /mnt/user-data/outputs can be sent)",
            ),
            (
                "![a plot](plot.png)",
                "a plot (plot.png: not attached, only files in /mnt/user-data/outputs can be sent)",
            ),
            (
                "![your photo](/mnt/user-data/uploads/cat.jpg)",
                "your photo (cat.jpg, sent earlier in this chat)",
            ),
            (
                "[relative](notes/a.md) stays",
                "[relative](notes/a.md) stays",
            ),
            (
                "![logo](https://x.test/logo.png)",
                "[logo](https://x.test/logo.png)",
            ),
            ("![](https://x.test/l.png)", "[image](https://x.test/l.png)"),
            (
                "- [citation:A](https://a.test)\n- [citation:B](https://b.test)",
                "- [A](https://a.test)\n- [B](https://b.test)",
            ),
            (
                "half [citation:Streaming](https://x.te",
                "half [citation:Streaming](https://x.te",
            ),
            (
                "\\[citation:escaped](https://x.test)",
                "\\[citation:escaped](https://x.test)",
            ),
            ("[not a](link with spaces)", "[not a](link with spaces)"),
            ("[a\n\nb](https://x.test)", "[a\n\nb](https://x.test)"),
            (
                "[citation:Ünïcødé [2024]](https://x.test/ü 'title')",
                "[Ünïcødé [2024]](https://x.test/ü)",
            ),
            (
                "![Sales](</mnt/user-data/outputs/my chart.png>)",
                "Sales (📎 my chart.png)",
            ),
            (
                "[![badge](https://x.test/b.svg)](https://x.test)",
                "[[badge](https://x.test/b.svg)](https://x.test)",
            ),
            (
                "**Sources:** [citation:A](https://a.test), [citation:B](https://b.test \"B\")",
                "**Sources:** [A](https://a.test), [B](https://b.test)",
            ),
        ];
        for (markdown, expected) in cases {
            assert_eq!(for_chat(markdown, fate), expected, "{markdown:?}");
        }
    }

    #[test]
    fn each_file_is_asked_about_once_per_mention_in_order() {
        let mut asked = Vec::new();
        let text = "![a](/mnt/user-data/outputs/a.png) and [b](/mnt/user-data/outputs/b.csv) \
                    and [site](https://x.test) and ![a again](/mnt/user-data/outputs/a.png)";
        for_chat(text, |link| {
            asked.push((link.path.clone(), link.image));
            FileFate::Pending
        });
        assert_eq!(
            asked,
            [
                ("/mnt/user-data/outputs/a.png".to_string(), true),
                ("/mnt/user-data/outputs/b.csv".to_string(), false),
                ("/mnt/user-data/outputs/a.png".to_string(), true),
            ]
        );
    }

    #[test]
    fn streaming_mentions_name_the_file_only() {
        let text = "![Sales](/mnt/user-data/outputs/chart.png) ![](/tmp/x.png)";
        assert_eq!(
            for_chat(text, |_| FileFate::Pending),
            "Sales (chart.png) x.png"
        );
    }
}
