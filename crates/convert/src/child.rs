//! The converter child, `antler convert --kind <kind>`: reads the document on stdin and writes
//! its Markdown on stdout. It runs under the limits the daemon set before exec; how it ended
//! is its exit status (a line on stderr says more), so the daemon never parses an error out
//! of the Markdown.
//!
//! The parser runs on a thread with a known, large stack: HTML and XML nesting is bounded
//! before it recurses, and the stack no longer depends on the host's `ulimit -s`.

use std::io::{Read, Write};
use std::process::ExitCode;

use crate::{Kind, PARSER_STACK_BYTES, documents, html, sheets};

/// The input was not a readable document of its kind (stderr: why).
pub const EXIT_UNREADABLE: i32 = 65;
/// The document has no text to extract.
pub const EXIT_NO_TEXT: i32 = 66;
/// The parser panicked.
pub const EXIT_CRASHED: i32 = 70;
/// Memory ran out before the parser could even start.
pub const EXIT_NO_MEMORY: i32 = 71;
/// `--kind` named nothing this binary converts.
pub const EXIT_USAGE: i32 = 64;
/// Largest input read; the daemon never sends more (uploads are 50 MiB at most).
const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// How a conversion in the child failed.
#[derive(Debug, PartialEq, Eq)]
pub enum Failure {
    Unreadable(String),
    NoText,
}

/// The entry point of `antler convert`.
pub fn main(kind: &str) -> ExitCode {
    let Some(kind) = Kind::from_arg(kind) else {
        let known: Vec<&str> = Kind::ALL.iter().map(|k| k.arg()).collect();
        eprintln!("unknown --kind {kind}; use one of {}", known.join(", "));
        return exit(EXIT_USAGE);
    };
    let mut input = Vec::new();
    if let Err(error) = std::io::stdin()
        .lock()
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut input)
    {
        eprintln!("could not read the input: {error}");
        return exit(EXIT_UNREADABLE);
    }
    if input.len() as u64 > MAX_INPUT_BYTES {
        eprintln!("the input is larger than {MAX_INPUT_BYTES} bytes");
        return exit(EXIT_UNREADABLE);
    }
    let worker = std::thread::Builder::new()
        .name("convert".into())
        .stack_size(PARSER_STACK_BYTES)
        .spawn(move || convert(kind, &input));
    let outcome = match worker {
        Ok(worker) => worker.join(),
        Err(error) => {
            eprintln!("could not start the parsing thread: {error}");
            return exit(EXIT_NO_MEMORY);
        }
    };
    match outcome {
        Ok(Ok(markdown)) => {
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(markdown.as_bytes())
                .and_then(|()| stdout.flush())
            {
                Ok(()) => ExitCode::SUCCESS,
                // The daemon stopped reading (it killed us, or went away).
                Err(_) => exit(EXIT_CRASHED),
            }
        }
        Ok(Err(Failure::Unreadable(detail))) => {
            eprintln!("{detail}");
            exit(EXIT_UNREADABLE)
        }
        Ok(Err(Failure::NoText)) => exit(EXIT_NO_TEXT),
        // The panic message is already on stderr.
        Err(_) => exit(EXIT_CRASHED),
    }
}

/// The Markdown body of `input` read as `kind` (for HTML, the encoded [`html::Page`]).
pub fn convert(kind: Kind, input: &[u8]) -> Result<String, Failure> {
    let body = match kind {
        Kind::Html => return Ok(html::page_to_markdown(&String::from_utf8_lossy(input)).encode()),
        Kind::Pdf => documents::pdf_to_markdown(input),
        Kind::Xlsx => sheets::xlsx_to_markdown(input),
        Kind::Docx => crate::ooxml::docx_to_markdown(input),
        Kind::Pptx => crate::ooxml::pptx_to_markdown(input),
    }
    .map_err(Failure::Unreadable)?;
    if body.trim().is_empty() {
        return Err(Failure::NoText);
    }
    Ok(body.trim_end().to_string())
}

fn exit(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
