//! Counting replies: every question carries a unique marker, so each complete answer the bot
//! left on a platform belongs to exactly one question.

use std::collections::HashMap;

use crate::bench::model::answer_for;

/// What the bot left on the platforms, against what was asked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub asked: usize,
    /// Questions with exactly one complete answer.
    pub answered: usize,
    /// Markers of questions with no complete answer.
    pub lost: Vec<String>,
    /// Markers of questions answered more than once, with the count.
    pub duplicated: Vec<(String, usize)>,
    /// Bot messages naming a marker that are not a complete answer (a preview a crash cut
    /// short, then answered in a new message).
    pub partial: usize,
}

impl Tally {
    /// `asked`: every marker sent; `texts`: the current text of every bot message.
    pub fn count<'a>(
        asked: impl IntoIterator<Item = &'a String>,
        texts: impl IntoIterator<Item = String>,
    ) -> Self {
        let mut complete: HashMap<String, usize> = HashMap::new();
        let mut partial = 0;
        for text in texts {
            let text = text.trim();
            let Some(marker) = text
                .split(|c: char| !c.is_ascii_alphanumeric())
                .find(|w| w.starts_with('q') && w.contains('x'))
            else {
                continue;
            };
            if text == answer_for(marker) {
                *complete.entry(marker.to_string()).or_default() += 1;
            } else {
                partial += 1;
            }
        }
        let mut tally = Self {
            partial,
            ..Self::default()
        };
        for marker in asked {
            tally.asked += 1;
            match complete.get(marker).copied().unwrap_or(0) {
                0 => tally.lost.push(marker.clone()),
                1 => tally.answered += 1,
                n => tally.duplicated.push((marker.clone(), n)),
            }
        }
        tally
    }

    /// The first few lost and duplicated markers, for a report's last lines.
    pub fn examples(&self) -> String {
        let lost: Vec<&str> = self.lost.iter().take(5).map(String::as_str).collect();
        let dup: Vec<String> = self
            .duplicated
            .iter()
            .take(5)
            .map(|(m, n)| format!("{m}×{n}"))
            .collect();
        format!("lost e.g. {lost:?}; duplicated e.g. {dup:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_duplicated_and_partial_answers_are_told_apart() {
        let asked: Vec<String> = ["q1x1", "q1x2", "q2x1"].map(String::from).to_vec();
        let texts = vec![
            answer_for("q1x1"),
            "Answer to q1x2 ".to_string(),
            answer_for("q2x1"),
            answer_for("q2x1"),
            "unrelated".to_string(),
        ];
        let tally = Tally::count(&asked, texts);
        assert_eq!(tally.asked, 3);
        assert_eq!(tally.answered, 1);
        assert_eq!(tally.lost, vec!["q1x2".to_string()]);
        assert_eq!(tally.duplicated, vec![("q2x1".to_string(), 2)]);
        assert_eq!(tally.partial, 1);
    }
}
