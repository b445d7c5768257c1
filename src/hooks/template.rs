//! Prompt templates of webhook endpoints: `{{body}}` is the payload as JSON, and
//! `{{body.alerts.0.labels.alertname}}` one value by path (object keys and array indexes).

use serde_json::Value;

/// The one variable a template may name: the payload.
const ROOT: &str = "body";

/// Renders `template` with `body`; every substituted value goes through `quote` (the prompt
/// wraps payload values as untrusted content; a key or chat id uses them as they are). A path
/// that names nothing renders as the empty string.
pub fn render(template: &str, body: &Value, quote: &dyn Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let Some(length) = rest[start + 2..].find("}}") else {
            break;
        };
        out.push_str(&rest[..start]);
        let path = rest[start + 2..start + 2 + length].trim();
        if let Some(text) = lookup(body, path).map(as_text).filter(|t| !t.is_empty()) {
            out.push_str(&quote(&text));
        }
        rest = &rest[start + 2 + length + 2..];
    }
    out.push_str(rest);
    out
}

/// The value `path` (`body`, `body.a.0.b`) names in `body`.
fn lookup<'a>(body: &'a Value, path: &str) -> Option<&'a Value> {
    let mut parts = path.split('.');
    if parts.next() != Some(ROOT) {
        return None;
    }
    parts.try_fold(body, |value, part| match value {
        Value::Object(map) => map.get(part),
        Value::Array(items) => items.get(part.parse::<usize>().ok()?),
        _ => None,
    })
}

/// Strings as they are, `null` as nothing, anything else as JSON.
fn as_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn plain(text: &str) -> String {
        text.to_string()
    }

    #[test]
    fn paths_render_values_and_missing_ones_render_empty() {
        let body = json!({
            "status": "firing",
            "alerts": [{"labels": {"alertname": "DiskFull", "severity": 2}, "fingerprint": "f1"}],
            "resolved": false,
            "note": null
        });
        let cases = [
            ("{{body.status}}", "firing"),
            ("{{ body.alerts.0.labels.alertname }}", "DiskFull"),
            ("{{body.alerts.0.labels.severity}}", "2"),
            ("{{body.resolved}}", "false"),
            (
                "{{body.alerts.0.labels}}",
                r#"{"alertname":"DiskFull","severity":2}"#,
            ),
            ("{{body.alerts.1.labels}}", ""),
            ("{{body.missing.deep}}", ""),
            ("{{body.status.0}}", ""),
            ("{{body.note}}", ""),
            ("{{other.status}}", ""),
            ("key-{{body.alerts.0.fingerprint}}-x", "key-f1-x"),
            ("no placeholders", "no placeholders"),
            ("unclosed {{body.status", "unclosed {{body.status"),
        ];
        for (template, expected) in cases {
            assert_eq!(render(template, &body, &plain), expected, "{template}");
        }
        assert_eq!(
            render("{{body}}", &json!({"a": [1, "x"]}), &plain),
            r#"{"a":[1,"x"]}"#
        );
    }

    #[test]
    fn every_value_goes_through_quote_and_the_template_text_does_not() {
        let body = json!({"title": "Fix it", "user": {"login": "ann"}});
        let quote = |text: &str| format!("<q>{text}</q>");
        assert_eq!(
            render(
                "Review {{body.title}} by {{body.user.login}}{{body.none}}.",
                &body,
                &quote
            ),
            "Review <q>Fix it</q> by <q>ann</q>."
        );
    }
}
