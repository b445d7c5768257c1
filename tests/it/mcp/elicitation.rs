//! Elicitation (SEP-1034) over the wire: the capability is declared unless the policy is
//! `Unsupported`, and a server's `elicitation/create` is answered with the form's defaults or
//! declined.

use antler::mcp::handler::ElicitationPolicy;
use antler_test_support::{FakeMcpServer, ToolCallReply};
use serde_json::{Value, json};

use super::versions::{call_echo, open};

/// The conformance suite's form: a default of every kind, nothing required.
fn every_kind() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"],
                       "default": "active"},
            "verified": {"type": "boolean", "default": true}
        },
        "required": []
    })
}

async fn elicit(policy: ElicitationPolicy, schema: Value) -> (FakeMcpServer, Value) {
    let server = FakeMcpServer::start(
        "2025-11-25",
        ToolCallReply::Elicit {
            requested_schema: schema,
        },
    )
    .await;
    let connection = open(&server.url(), policy).await.expect("connects");
    let text = call_echo(&connection, json!({})).await;
    let answer: Value = serde_json::from_str(&text).expect("the tool answers the form's result");
    assert_eq!(server.elicitation_answers(), vec![answer.clone()]);
    (server, answer)
}

#[tokio::test]
async fn accept_defaults_fills_every_kind_of_default() {
    let (server, answer) = elicit(ElicitationPolicy::AcceptDefaults, every_kind()).await;
    assert_eq!(answer["action"], "accept");
    assert_eq!(
        answer["content"],
        json!({"name": "John Doe", "age": 30, "score": 95.5, "status": "active",
               "verified": true})
    );
    let initialize = server.request("initialize").unwrap();
    let capabilities = &initialize.body["params"]["capabilities"];
    assert!(
        capabilities["elicitation"].is_object(),
        "elicitation declared: {capabilities}"
    );
}

#[tokio::test]
async fn accept_defaults_declines_a_required_field_without_default() {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "email": {"type": "string"}
        },
        "required": ["name", "email"]
    });
    let (_server, answer) = elicit(ElicitationPolicy::AcceptDefaults, schema).await;
    assert_eq!(answer["action"], "decline");
    assert!(answer.get("content").is_none(), "{answer}");
}

#[tokio::test]
async fn decline_declines_and_unsupported_declares_nothing() {
    let (server, answer) = elicit(ElicitationPolicy::Decline, every_kind()).await;
    assert_eq!(answer["action"], "decline");
    let declared = &server.request("initialize").unwrap().body["params"]["capabilities"];
    assert!(declared["elicitation"].is_object(), "{declared}");

    let (server, _) = elicit(ElicitationPolicy::Unsupported, every_kind()).await;
    let undeclared = &server.request("initialize").unwrap().body["params"]["capabilities"];
    assert!(undeclared.get("elicitation").is_none(), "{undeclared}");
}
