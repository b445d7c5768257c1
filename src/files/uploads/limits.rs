//! The limits every upload obeys, whether it came in an HTTP request or with a chat message:
//! at most `uploads.max_files` files in one upload (one request, one message), each at most
//! `uploads.max_file_size`, and the thread's uploads together at most `uploads.max_total_size`.

use crate::config::UploadsConfig;

/// Why a file is refused.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum LimitError {
    #[error(
        "at most {max} files per upload or chat message (uploads.max_files); send the rest in \
         another one"
    )]
    TooManyFiles { max: usize },
    #[error("{name} is larger than the {} per-file limit (uploads.max_file_size)", size_text(*max))]
    FileTooLarge { name: String, max: u64 },
    #[error(
        "{name} would take the thread's uploads over {} in total (uploads.max_total_size); \
         delete some of its uploads or start a new conversation",
        size_text(*max)
    )]
    ThreadFull { name: String, max: u64 },
}

/// One upload's running account against the limits: how many files it took and how many bytes
/// the thread holds with them.
#[derive(Clone, Debug)]
pub struct UploadBudget {
    max_files: usize,
    max_file_size: u64,
    max_total_size: u64,
    files: usize,
    total: u64,
}

impl UploadBudget {
    /// A budget for one upload into a thread whose uploads hold `thread_total` bytes already.
    pub fn new(limits: &UploadsConfig, thread_total: u64) -> Self {
        Self {
            max_files: limits.max_files,
            max_file_size: limits.max_file_size,
            max_total_size: limits.max_total_size,
            files: 0,
            total: thread_total,
        }
    }

    /// Takes the place of one more file, or says the upload has as many as it may.
    pub fn take_slot(&mut self) -> Result<(), LimitError> {
        if self.files >= self.max_files {
            return Err(LimitError::TooManyFiles {
                max: self.max_files,
            });
        }
        self.files += 1;
        Ok(())
    }

    /// Whether `name`, at `size` bytes (all of it, or what arrived so far), still fits.
    pub fn check_size(&self, name: &str, size: u64) -> Result<(), LimitError> {
        if size > self.max_file_size {
            return Err(LimitError::FileTooLarge {
                name: name.to_string(),
                max: self.max_file_size,
            });
        }
        if self.total.saturating_add(size) > self.max_total_size {
            return Err(LimitError::ThreadFull {
                name: name.to_string(),
                max: self.max_total_size,
            });
        }
        Ok(())
    }

    /// Counts a file that is kept.
    pub fn add(&mut self, size: u64) {
        self.total = self.total.saturating_add(size);
    }

    pub fn max_file_size(&self) -> u64 {
        self.max_file_size
    }
}

/// A size as people read it: `50 MiB`, `1.5 MiB`, `900 KiB`, `1000 bytes`.
pub fn size_text(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    let (value, unit) = match bytes {
        b if b >= MIB => (b as f64 / MIB as f64, "MiB"),
        b if b >= KIB && b % KIB == 0 => (b as f64 / KIB as f64, "KiB"),
        b => return format!("{b} bytes"),
    };
    if value.fract() == 0.0 {
        format!("{value:.0} {unit}")
    } else {
        format!("{value:.1} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_files: usize, max_file_size: u64, max_total_size: u64) -> UploadsConfig {
        UploadsConfig {
            max_files,
            max_file_size,
            max_total_size,
            ..UploadsConfig::default()
        }
    }

    #[test]
    fn files_sizes_and_the_thread_total_are_counted() {
        let mut budget = UploadBudget::new(&limits(2, 100, 250), 60);
        assert_eq!(budget.take_slot(), Ok(()));
        assert_eq!(budget.check_size("a", 100), Ok(()));
        budget.add(100);
        assert_eq!(
            budget.check_size("big", 101),
            Err(LimitError::FileTooLarge {
                name: "big".into(),
                max: 100
            })
        );
        assert_eq!(budget.take_slot(), Ok(()));
        assert_eq!(
            budget.check_size("b", 91),
            Err(LimitError::ThreadFull {
                name: "b".into(),
                max: 250
            }),
            "60 before + 100 + 91 > 250"
        );
        assert_eq!(budget.check_size("b", 90), Ok(()));
        assert_eq!(budget.take_slot(), Err(LimitError::TooManyFiles { max: 2 }));
    }

    #[test]
    fn messages_name_the_key_and_a_readable_size() {
        let cases = [
            (
                LimitError::FileTooLarge {
                    name: "a.pdf".into(),
                    max: 50 * 1024 * 1024,
                },
                "a.pdf is larger than the 50 MiB per-file limit (uploads.max_file_size)",
            ),
            (
                LimitError::ThreadFull {
                    name: "b.bin".into(),
                    max: 1500,
                },
                "b.bin would take the thread's uploads over 1500 bytes in total (uploads.max_total_size)",
            ),
            (
                LimitError::TooManyFiles { max: 10 },
                "at most 10 files per upload or chat message (uploads.max_files)",
            ),
        ];
        for (error, expected) in cases {
            assert!(error.to_string().contains(expected), "{error}");
        }
        assert_eq!(size_text(1536 * 1024), "1.5 MiB");
        assert_eq!(size_text(900 * 1024), "900 KiB");
    }
}
