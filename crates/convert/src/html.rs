//! HTML to a DOM and to Markdown with bounded nesting, so neither the parse nor the recursive
//! Markdown walk grows with a page's depth.
//!
//! html5ever looks through its whole stack of open elements for most start tags, so a page of
//! 200,000 nested `<div>`s took minutes, and htmd's walk then recursed 200,000 deep. Two
//! bounds: between tokenizer and tree builder, [`DepthCap`] drops start tags that would nest
//! deeper than [`MAX_DEPTH`] (and their end tags), so their text lands in the deepest element
//! kept, as browsers do past 512 levels; its count of open elements approximates the tree
//! builder's (implied end tags of `p`, `li`, table cells…), so after the parse, [`prune`] turns
//! whatever still sits deeper than [`PRUNE_DEPTH`] into its text, exactly.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::tree_builder::{TreeBuilder, TreeBuilderOpts};
use html5ever::{LocalName, TokenizerResult};
use markup5ever_rcdom::{Node, NodeData, RcDom};

/// Elements kept nested; deeper start tags are dropped, their content kept in place.
pub const MAX_DEPTH: usize = 512;
/// Depth below which the parsed tree is flattened to text whatever the parser did.
pub const PRUNE_DEPTH: usize = 1024;
/// Elements that carry no readable content.
const SKIPPED_TAGS: &[&str] = &[
    "head", "script", "style", "noscript", "template", "iframe", "svg", "canvas", "form", "button",
    "nav", "footer",
];
/// Elements that never hold children.
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "keygen", "link", "meta", "param",
    "source", "track", "wbr", "frame", "basefont", "bgsound", "image",
];
/// Elements the tree builder merges rather than nests.
const NOT_NESTING: &[&str] = &["html", "head", "body", "frameset"];
/// Elements whose content the tokenizer reads as text (never dropped: the tree builder must
/// see them to switch the tokenizer's state).
const RAW_TEXT: &[&str] = &[
    "script",
    "style",
    "textarea",
    "title",
    "xmp",
    "iframe",
    "noembed",
    "noframes",
    "noscript",
    "plaintext",
];
/// Start tags that close an open `p`.
const CLOSES_P: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "center",
    "details",
    "dialog",
    "dir",
    "div",
    "dl",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hgroup",
    "main",
    "menu",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "ul",
    "li",
    "dd",
    "dt",
    "listing",
];
/// Where the search for an open `p` stops.
const SCOPE: &[&str] = &[
    "applet", "caption", "html", "table", "td", "th", "marquee", "object", "template", "button",
];
/// Where the search for an open `li` stops.
const LIST_ITEM_SCOPE: &[&str] = &[
    "applet", "caption", "html", "table", "td", "th", "marquee", "object", "template", "ul", "ol",
];
/// Where the search for an open `dt` or `dd` stops.
const DEFINITION_SCOPE: &[&str] = &[
    "applet", "caption", "html", "table", "td", "th", "marquee", "object", "template", "dl",
];
/// Where the search for an open `tr` stops (open cells are closed on the way).
const TABLE_SCOPE: &[&str] = &["html", "table", "template"];
/// Where the search for an open cell stops.
const ROW_SCOPE: &[&str] = &["html", "table", "template", "tr"];
const SELECT_SCOPE: &[&str] = &["select", "datalist", "html", "template"];
const HEADINGS: &[&str] = &["h1", "h2", "h3", "h4", "h5", "h6"];

/// A page as Markdown, and what the bounds changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Page {
    pub title: Option<String>,
    pub markdown: String,
    /// Elements flattened because they nested too deeply.
    pub flattened: usize,
}

impl Page {
    /// The child's stdout: the title line, the flattened count, then the Markdown.
    pub(crate) fn encode(&self) -> String {
        let title = self.title.as_deref().unwrap_or_default().replace('\n', " ");
        format!("{title}\n{}\n{}", self.flattened, self.markdown)
    }

    pub(crate) fn decode(output: &str) -> Self {
        let mut parts = output.splitn(3, '\n');
        let title = parts.next().unwrap_or_default().trim().to_string();
        let flattened = parts.next().unwrap_or_default().trim().parse().unwrap_or(0);
        Self {
            title: (!title.is_empty()).then_some(title),
            flattened,
            markdown: parts.next().unwrap_or_default().to_string(),
        }
    }
}

/// A parsed document whose nesting is bounded.
pub struct Parsed {
    pub document: Rc<Node>,
    /// Elements dropped or flattened by the bounds.
    pub flattened: usize,
}

/// Parses `html` like a browser would, nesting at most [`MAX_DEPTH`] (see the module doc).
pub fn parse(html: &str) -> Parsed {
    let builder = TreeBuilder::new(
        RcDom::default(),
        TreeBuilderOpts {
            // What htmd parses with: `<noscript>` content is text (and skipped).
            scripting_enabled: true,
            ..Default::default()
        },
    );
    let tokenizer = Tokenizer::new(DepthCap::new(builder), TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    while let TokenizerResult::Script(_) = tokenizer.feed(&input) {}
    tokenizer.end();
    let dropped = tokenizer.sink.nesting.borrow().dropped_total;
    let document = tokenizer.sink.inner.sink.document.clone();
    let pruned = prune(&document, PRUNE_DEPTH);
    Parsed {
        document,
        flattened: dropped + pruned,
    }
}

/// The page title and its content as Markdown, without scripts, styles and navigation.
pub fn page_to_markdown(html: &str) -> Page {
    let parsed = parse(html);
    let converter = htmd::HtmlToMarkdown::builder()
        .skip_tags(SKIPPED_TAGS.to_vec())
        .build();
    let title = first_element(&parsed.document, "title").map(|title| text_of(&title));
    let markdown = converter.tree_to_markdown(&parsed.document);
    Page {
        title: title.filter(|t| !t.is_empty()),
        markdown: collapse_blank_lines(&markdown),
        flattened: parsed.flattened,
    }
}

/// Replaces the children of every element at `depth` by their text; returns how many elements
/// went. Iterative, so it is safe on any tree.
pub fn prune(document: &Rc<Node>, depth: usize) -> usize {
    let mut removed = 0;
    let mut stack = vec![(document.clone(), 0usize)];
    while let Some((node, level)) = stack.pop() {
        if level >= depth && matches!(node.data, NodeData::Element { .. }) {
            let children = std::mem::take(&mut *node.children.borrow_mut());
            if children.is_empty() {
                continue;
            }
            let mut text = String::new();
            for child in &children {
                removed += collect_text(child, &mut text);
            }
            let leaf = Node::new(NodeData::Text {
                contents: RefCell::new(StrTendril::from_slice(&text)),
            });
            leaf.parent.set(Some(Rc::downgrade(&node)));
            node.children.borrow_mut().push(leaf);
            continue;
        }
        for child in node.children.borrow().iter() {
            stack.push((child.clone(), level + 1));
        }
    }
    removed
}

/// Appends the text under `node` to `out`; returns the elements it passed.
fn collect_text(node: &Rc<Node>, out: &mut String) -> usize {
    let mut elements = 0;
    let mut stack = vec![node.clone()];
    while let Some(current) = stack.pop() {
        match &current.data {
            NodeData::Text { contents } => out.push_str(&contents.borrow()),
            NodeData::Element { .. } => elements += 1,
            _ => {}
        }
        stack.extend(current.children.borrow().iter().rev().cloned());
    }
    elements
}

fn first_element(root: &Rc<Node>, tag: &str) -> Option<Rc<Node>> {
    let mut stack = vec![root.clone()];
    while let Some(node) = stack.pop() {
        if let NodeData::Element { name, .. } = &node.data
            && &*name.local == tag
        {
            return Some(node);
        }
        stack.extend(node.children.borrow().iter().rev().cloned());
    }
    None
}

/// The text under `node`, whitespace collapsed.
fn text_of(node: &Rc<Node>) -> String {
    let mut text = String::new();
    collect_text(node, &mut text);
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most one blank line in a row: converted pages are full of empty blocks.
fn collapse_blank_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.lines() {
        if line.trim().is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
            out.push('\n');
        } else {
            blank = 0;
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
    out.trim().to_string()
}

/// A token filter in front of the tree builder that keeps nesting under [`MAX_DEPTH`].
struct DepthCap<S> {
    inner: S,
    nesting: RefCell<Nesting>,
}

impl<S> DepthCap<S> {
    fn new(inner: S) -> Self {
        Self {
            inner,
            nesting: RefCell::new(Nesting::default()),
        }
    }
}

impl<S: TokenSink> TokenSink for DepthCap<S> {
    type Handle = S::Handle;

    fn process_token(&self, token: Token, line_number: u64) -> TokenSinkResult<S::Handle> {
        if let Token::TagToken(tag) = &token {
            let admitted = self.nesting.borrow_mut().admit(tag);
            if !admitted {
                return TokenSinkResult::Continue;
            }
        }
        self.inner.process_token(token, line_number)
    }

    fn end(&self) {
        self.inner.end();
    }

    fn adjusted_current_node_present_but_not_in_html_namespace(&self) -> bool {
        self.inner
            .adjusted_current_node_present_but_not_in_html_namespace()
    }
}

/// The filter's model of the open elements: at most [`MAX_DEPTH`] names (plus one raw-text
/// element). A search in it runs only when the element it looks for is open (`counts`), so a
/// tag costs O(1) in a page of nothing but nested `<div>`s.
#[derive(Default)]
struct Nesting {
    open: Vec<LocalName>,
    /// Open elements per name.
    counts: HashMap<LocalName, usize>,
    /// Start tags dropped per name, whose end tags are dropped too.
    dropped: HashMap<LocalName, usize>,
    dropped_total: usize,
}

impl Nesting {
    /// Whether the tag goes on to the tree builder.
    fn admit(&mut self, tag: &Tag) -> bool {
        match tag.kind {
            TagKind::StartTag => self.open_element(tag),
            TagKind::EndTag => self.close_element(&tag.name),
        }
    }

    fn open_element(&mut self, tag: &Tag) -> bool {
        let name: &str = &tag.name;
        // Inside `svg` and `math`, `<x/>` closes itself.
        let foreign = self.is_open("svg") || self.is_open("math");
        if VOID.contains(&name) || NOT_NESTING.contains(&name) || (tag.self_closing && foreign) {
            return true;
        }
        self.close_implied(name);
        if self.open.len() >= MAX_DEPTH && !RAW_TEXT.contains(&name) {
            *self.dropped.entry(tag.name.clone()).or_default() += 1;
            self.dropped_total += 1;
            return false;
        }
        *self.counts.entry(tag.name.clone()).or_default() += 1;
        self.open.push(tag.name.clone());
        true
    }

    fn close_element(&mut self, name: &LocalName) -> bool {
        if let Some(count) = self.dropped.get_mut(name)
            && *count > 0
        {
            *count -= 1;
            return false;
        }
        if self.counts.get(name).is_some_and(|count| *count > 0)
            && let Some(at) = self.open.iter().rposition(|open| open == name)
        {
            self.truncate(at);
        }
        true
    }

    fn is_open(&self, name: &str) -> bool {
        self.counts
            .get(&LocalName::from(name))
            .is_some_and(|count| *count > 0)
    }

    /// The end tags the tree builder implies before `name` opens (a `li` closes the open
    /// `li` of its list, a block closes an open `p`, …).
    fn close_implied(&mut self, name: &str) {
        let (targets, stops): (&[&str], &[&str]) = match name {
            "li" => (&["li"], LIST_ITEM_SCOPE),
            "dt" | "dd" => (&["dt", "dd"], DEFINITION_SCOPE),
            "tr" => (&["tr"], TABLE_SCOPE),
            "td" | "th" => (&["td", "th"], ROW_SCOPE),
            "option" => (&["option"], SELECT_SCOPE),
            "optgroup" => (&["optgroup", "option"], SELECT_SCOPE),
            _ => (&[], &[]),
        };
        self.close_nearest(targets, stops);
        if CLOSES_P.contains(&name) {
            self.close_nearest(&["p"], SCOPE);
        }
        if HEADINGS.contains(&name)
            && self
                .open
                .last()
                .is_some_and(|open| HEADINGS.contains(&&**open))
        {
            self.truncate(self.open.len() - 1);
        }
    }

    /// Closes the nearest open element named in `targets`, unless one of `stops` comes first.
    fn close_nearest(&mut self, targets: &[&str], stops: &[&str]) {
        if !targets.iter().any(|target| self.is_open(target)) {
            return;
        }
        for at in (0..self.open.len()).rev() {
            let open: &str = &self.open[at];
            if targets.contains(&open) {
                self.truncate(at);
                return;
            }
            if stops.contains(&open) {
                return;
            }
        }
    }

    fn truncate(&mut self, at: usize) {
        for name in self.open.drain(at..) {
            if let Some(count) = self.counts.get_mut(&name) {
                *count = count.saturating_sub(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a thread with the converter child's stack: the Markdown walk recurses once
    /// per level (~3 KiB a level in a debug build), more than a test thread's 2 MiB allow.
    fn on_child_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::Builder::new()
            .stack_size(crate::PARSER_STACK_BYTES)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap()
    }

    #[test]
    fn html_becomes_markdown_without_scripts_or_navigation() {
        let html = r#"<html><head><title>Tea  Guide</title><style>p{}</style></head><body>
            <nav><a href="/">Home</a></nav>
            <h1>Brewing</h1><script>alert(1)</script>
            <p>Use <strong>hot</strong> water.</p><p></p><p></p>
            <ul><li>Green</li><li>Black</li></ul>
            <footer>© 2026</footer></body></html>"#;
        let page = page_to_markdown(html);
        assert_eq!(page.title.as_deref(), Some("Tea Guide"));
        assert_eq!(page.flattened, 0);
        let markdown = &page.markdown;
        assert!(markdown.starts_with("# Brewing"), "{markdown}");
        assert!(markdown.contains("Use **hot** water."), "{markdown}");
        assert!(markdown.contains("*   Green"), "{markdown}");
        for gone in ["alert", "Home", "©", "p{}", "\n\n\n"] {
            assert!(!markdown.contains(gone), "{gone:?} in {markdown}");
        }
    }

    fn depth(node: &Rc<Node>) -> usize {
        let mut deepest = 0;
        let mut stack = vec![(node.clone(), 0)];
        while let Some((node, level)) = stack.pop() {
            deepest = deepest.max(level);
            for child in node.children.borrow().iter() {
                stack.push((child.clone(), level + 1));
            }
        }
        deepest
    }

    #[test]
    fn deep_nesting_is_flattened_and_its_text_kept() {
        // The issue's page (2.2 MB): parsing it took minutes while every tag searched all the
        // open elements; now it costs what a flat page of as many elements does.
        let levels = 200_000;
        let html = format!(
            "<title>Deep</title>{}<b>bottom</b>{}<p>after</p>",
            "<div>x".repeat(levels),
            "</div>".repeat(levels)
        );
        let parsed = parse(&html);
        let deepest = depth(&parsed.document);
        assert!(deepest <= MAX_DEPTH + 8, "{deepest}");
        assert_eq!(
            parsed.flattened,
            levels - MAX_DEPTH + 1,
            "the divs and the b"
        );
        let page = on_child_stack(move || page_to_markdown(&html));
        assert_eq!(page.title.as_deref(), Some("Deep"));
        assert!(
            page.markdown.contains("bottom"),
            "{}",
            &page.markdown[..200]
        );
        assert!(page.markdown.ends_with("after"), "the end tags all matched");
        assert_eq!(page.markdown.matches('x').count(), levels);
    }

    #[test]
    fn sloppy_lists_paragraphs_and_tables_do_not_count_as_nesting() {
        let items = "<li>item".repeat(2_000);
        let paragraphs = "<p>para".repeat(2_000);
        let cells = "<tr><td>a<td>b".repeat(2_000);
        let html = format!("<ul>{items}</ul>{paragraphs}<table>{cells}</table><h2>End</h2>");
        assert_eq!(parse(&html).flattened, 0, "nothing here is deep");
        let markdown = on_child_stack(move || page_to_markdown(&html).markdown);
        assert_eq!(markdown.matches("*   item").count(), 2_000);
        assert_eq!(markdown.matches("para").count(), 2_000);
        assert!(
            markdown.ends_with("## End"),
            "{}",
            &markdown[markdown.len() - 100..]
        );
    }

    #[test]
    fn what_the_filter_cannot_see_is_pruned_to_text() {
        // Formatting elements a closed `p` leaves behind are reopened by the tree builder on
        // the next text, outside the filter's count: here 1,020 of them under 512 divs.
        let batch = |first: usize| -> String {
            (first..first + 510)
                .map(|k| format!("<b id=b{k}>"))
                .collect()
        };
        let html = format!(
            "<p>{}</p>x<p>{}</p>y{}deep",
            batch(0),
            batch(1000),
            "<div>".repeat(600)
        );
        let parsed = parse(&html);
        assert!(depth(&parsed.document) <= PRUNE_DEPTH + 1);
        assert!(parsed.flattened > 600 - MAX_DEPTH, "{}", parsed.flattened);
        let page = on_child_stack(move || page_to_markdown(&html));
        assert!(page.markdown.contains("deep"), "{}", page.markdown);
    }

    #[test]
    fn pages_round_trip_through_the_child_encoding() {
        let page = Page {
            title: Some("A\ntitle".into()),
            markdown: "# One\n\ntwo\n".into(),
            flattened: 3,
        };
        let decoded = Page::decode(&page.encode());
        assert_eq!(decoded.title.as_deref(), Some("A title"));
        assert_eq!(decoded.markdown, page.markdown);
        assert_eq!(decoded.flattened, 3);
        assert_eq!(Page::decode(&Page::default().encode()), Page::default());
    }
}
