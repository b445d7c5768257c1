//! Integration tests: config loading, env resolution, validation, hot reload and `config check`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use antler::config::{
    AppConfig, CONFIG_VERSION, ConfigError, ConfigHandle, ConfigOrigin, ConfigWatcher,
    EXIT_CONFIG_INVALID, EXIT_OK, LoadedConfig, MapEnv, PollOutcome, load_embedded_default,
    load_from_file, load_from_str, run_check,
};
use tokio_util::sync::CancellationToken;

const MODEL: &str =
    "models:\n  - name: main\n    model: gpt-4o\n    base_url: https://api.openai.com/v1\n";

fn load(text: &str, env: &MapEnv) -> Result<LoadedConfig, ConfigError> {
    load_from_str(text, ConfigOrigin::Embedded, env, Path::new("/work"))
}

fn load_ok(text: &str, env: &MapEnv) -> AppConfig {
    match load(text, env) {
        Ok(loaded) => loaded.config,
        Err(error) => panic!("expected a valid config, got: {error}"),
    }
}

fn problems(text: &str, env: &MapEnv) -> Vec<String> {
    match load(text, env) {
        Ok(_) => panic!("expected problems in:\n{text}"),
        Err(error) => error.problems().iter().map(|p| p.to_string()).collect(),
    }
}

fn paths(text: &str) -> Vec<String> {
    match load(text, &MapEnv::new()) {
        Ok(_) => panic!("expected problems in:\n{text}"),
        Err(error) => error.problems().iter().map(|p| p.path.clone()).collect(),
    }
}

#[test]
fn shipped_config_loads_with_an_empty_environment() {
    let loaded = load_embedded_default(&MapEnv::new(), Path::new("/srv/antler"))
        .unwrap_or_else(|error| panic!("shipped config.yaml must load: {error}"));
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.origin, ConfigOrigin::Embedded);
    let config = loaded.config;
    assert_eq!(config.config_version, CONFIG_VERSION);
    let model = config.default_model().expect("a default model");
    assert_eq!(model.name, "default");
    assert_eq!(model.model, "qwen2.5:7b");
    assert_eq!(model.base_url, "http://127.0.0.1:11434/v1");
    assert!(model.api_key.is_none(), "an empty key means none is sent");
    assert_eq!(config.gateway.listen, "127.0.0.1:8787");
    assert_eq!(config.data_dir, Some(PathBuf::from("/srv/antler/.antler")));
}

#[test]
fn shipped_config_takes_the_model_from_the_environment() {
    let env = MapEnv::new()
        .with("ANTLER_MODEL", "llama3.1")
        .with("ANTLER_MODEL_URL", "http://gpu:8000/v1")
        .with("ANTLER_MODEL_API_KEY", "sk-local");
    let config = load_embedded_default(&env, Path::new("/"))
        .expect("valid")
        .config;
    let model = &config.models[0];
    assert_eq!(model.model, "llama3.1");
    assert_eq!(model.base_url, "http://gpu:8000/v1");
    assert_eq!(model.api_key.as_ref().map(|k| k.expose()), Some("sk-local"));
}

#[test]
fn dollar_var_and_default_are_resolved() {
    let env = MapEnv::new()
        .with("OPENAI_API_KEY", "sk-test")
        .with("LIMIT", "42")
        .with("EMPTY", "");
    let text = "recursion_limit: ${LIMIT}\nmodels:\n  - name: main\n    model: ${MODEL_ID:-gpt-4o}\n    \
                base_url: ${URL:-https://api.openai.com/v1}\n    api_key: $OPENAI_API_KEY\n    \
                display_name: ${EMPTY:-Main}\n";
    let config = load_ok(text, &env);
    let model = &config.models[0];
    assert_eq!(model.api_key.as_ref().map(|k| k.expose()), Some("sk-test"));
    assert_eq!(model.model, "gpt-4o");
    assert_eq!(model.base_url, "https://api.openai.com/v1");
    assert_eq!(model.display_name.as_deref(), Some("Main"));
    assert_eq!(config.recursion_limit, 42, "env numbers become numbers");
}

#[test]
fn only_whole_string_values_are_substituted() {
    let env = MapEnv::new().with("HOST", "example.com");
    let text =
        "models:\n  - name: main\n    model: gpt $HOST\n    base_url: http://localhost/$HOST\n";
    let config = load_ok(text, &env);
    assert_eq!(config.models[0].model, "gpt $HOST");
    assert_eq!(config.models[0].base_url, "http://localhost/$HOST");
}

/// A missing variable is reported at its key; it is named unless the key holds a secret
/// (whose `$…` text may be the secret itself: see the `$uperSecret42` test below).
#[test]
fn missing_variable_names_the_key_path() {
    let text = format!("{MODEL}    api_key: $OPENAI_API_KEY\n    display_name: $MODEL_LABEL\n");
    let problems = problems(&text, &MapEnv::new());
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0]
            .starts_with("models[0].api_key: refers to an environment variable that is not set"),
        "{problems:?}"
    );
    assert!(!problems[0].contains("OPENAI_API_KEY"), "{problems:?}");
    assert!(
        problems[1]
            .starts_with("models[0].display_name: environment variable MODEL_LABEL is not set"),
        "{problems:?}"
    );
}

#[test]
fn unknown_keys_are_rejected_with_their_full_paths() {
    let text = format!("{MODEL}    tempreature: 0.5\ngateway:\n  api_tokenz: []\nloggin: x\n");
    assert_eq!(
        paths(&text),
        ["gateway.api_tokenz", "loggin", "models[0].tempreature"]
    );
    let error = load(&text, &MapEnv::new()).expect_err("unknown keys");
    assert!(error.to_string().contains("unknown key"), "{error}");
}

#[test]
fn every_kind_of_problem_is_reported_together() {
    let text = "models:\n  - name: main\n    model: gpt-4o\n    base_url: ftp://nope\n    \
                api_key: $MISSING_KEY\n    timeout: soon\n    tempreature: 1\n\
                title:\n  max_words: 50\ngateway:\n  listen: nowhere\n";
    let error = load(text, &MapEnv::new()).expect_err("several problems");
    let found: Vec<&str> = error.problems().iter().map(|p| p.path.as_str()).collect();
    for expected in [
        "models[0].api_key",     // env
        "models[0].timeout",     // type
        "models[0].tempreature", // unknown key
        "models[0].base_url",    // semantic
        "title.max_words",
        "gateway.listen",
    ] {
        assert!(
            found.contains(&expected),
            "{expected} missing from {found:?}"
        );
    }
    let rendered = error.to_string();
    assert_eq!(
        rendered.lines().count(),
        error.problems().len() + 1,
        "one line per problem after the heading:\n{rendered}"
    );
}

#[test]
fn every_validation_rule_reports_its_key_path() {
    let with_model = |extra: &str| format!("{MODEL}{extra}");
    let cases: Vec<(String, &str)> = vec![
        ("models: []\n".to_owned(), "models"),
        (
            "models:\n  - name: ''\n    model: m\n    base_url: http://h/v1\n".to_owned(),
            "models[0].name",
        ),
        (
            format!("{MODEL}  - name: main\n    model: m\n    base_url: http://h/v1\n"),
            "models[1].name",
        ),
        (
            "models:\n  - name: a\n    model: ''\n    base_url: http://h/v1\n".to_owned(),
            "models[0].model",
        ),
        (
            "models:\n  - name: a\n    model: m\n    base_url: localhost:11434\n".to_owned(),
            "models[0].base_url",
        ),
        (with_model("    fallback: ghost\n"), "models[0].fallback"),
        (with_model("    fallback: main\n"), "models[0].fallback"),
        (
            "models:\n  - {name: a, model: m, base_url: 'http://h', fallback: b}\n  \
             - {name: b, model: m, base_url: 'http://h', fallback: a}\n"
                .to_owned(),
            "models[0].fallback",
        ),
        (with_model("    timeout: 0\n"), "models[0].timeout"),
        (
            with_model("    temperature: 2.5\n"),
            "models[0].temperature",
        ),
        (
            with_model("gateway:\n  listen: localhost\n"),
            "gateway.listen",
        ),
        (
            with_model("gateway:\n  api_tokens:\n    - {token: '', user: bob}\n"),
            "gateway.api_tokens[0].token",
        ),
        (
            with_model(
                "gateway:\n  api_tokens:\n    - {token: t1, user: bob}\n    - {token: t1, user: amy}\n",
            ),
            "gateway.api_tokens[1].token",
        ),
        (
            with_model("gateway:\n  api_tokens:\n    - {token: t1, user: 'bob smith'}\n"),
            "gateway.api_tokens[0].user",
        ),
        (with_model("admins: ['ok', 'not ok']\n"), "admins[1]"),
        (with_model("recursion_limit: 0\n"), "recursion_limit"),
        (
            with_model("recursion_limit: 50\nmax_recursion_limit: 10\n"),
            "recursion_limit",
        ),
        (
            with_model("loop_detection:\n  warn_threshold: 6\n  hard_limit: 5\n"),
            "loop_detection.hard_limit",
        ),
        (
            with_model("loop_detection:\n  tool_freq_warn: 60\n"),
            "loop_detection.tool_freq_hard_limit",
        ),
        (
            with_model(
                "loop_detection:\n  tool_freq_overrides:\n    bash: {warn: 9, hard_limit: 3}\n",
            ),
            "loop_detection.tool_freq_overrides.bash.hard_limit",
        ),
        (
            with_model("token_budget:\n  max_tokens: 999\n"),
            "token_budget.max_tokens",
        ),
        (
            with_model("token_budget:\n  warn_threshold: 0.9\n  hard_stop_threshold: 0.5\n"),
            "token_budget.hard_stop_threshold",
        ),
        (with_model("title:\n  max_words: 0\n"), "title.max_words"),
        (with_model("title:\n  max_words: 21\n"), "title.max_words"),
        (with_model("title:\n  max_chars: 9\n"), "title.max_chars"),
        (with_model("title:\n  max_chars: 201\n"), "title.max_chars"),
        (
            with_model("uploads:\n  max_files: 0\n"),
            "uploads.max_files",
        ),
        (
            with_model("uploads:\n  max_file_size: 0\n"),
            "uploads.max_file_size",
        ),
        (
            with_model("uploads:\n  max_total_size: 0\n"),
            "uploads.max_total_size",
        ),
        (with_model("log_level: verbose\n"), "log_level"),
    ];
    for (text, expected) in cases {
        assert_eq!(paths(&text), [expected], "config:\n{text}");
    }
}

#[test]
fn boundary_values_are_accepted() {
    let text = format!(
        "{MODEL}    temperature: 2\n    fallback: local\n  - name: local\n    model: m\n    \
         base_url: http://127.0.0.1:11434/v1\ntitle:\n  max_words: 20\n  max_chars: 10\n\
         token_budget:\n  max_tokens: 1000\n  warn_threshold: 1.0\n  hard_stop_threshold: 1.0\n\
         recursion_limit: 1000\ngateway:\n  listen: '[::1]:9000'\n  api_tokens:\n    - {{token: t, user: a_b-9}}\n"
    );
    let config = load_ok(&text, &MapEnv::new());
    assert_eq!(config.models[0].fallback.as_deref(), Some("local"));
}

#[test]
fn secrets_never_appear_in_errors() {
    let env = MapEnv::new().with("TOKEN", "tok-SECRET-1");
    let text = format!(
        "{MODEL}    api_key: 123456789\ngateway:\n  api_tokens:\n    - {{token: $TOKEN, user: a}}\n    \
         - {{token: $TOKEN, user: 'b c'}}\n"
    );
    let error = load(&text, &env).expect_err("invalid");
    let rendered = error.to_string();
    assert!(rendered.contains("models[0].api_key"), "{rendered}");
    assert!(
        rendered.contains("gateway.api_tokens[1].token"),
        "{rendered}"
    );
    assert!(!rendered.contains("123456789"), "{rendered}");
    assert!(!rendered.contains("tok-SECRET-1"), "{rendered}");
}

#[test]
fn old_or_missing_config_version_warns_with_what_changed() {
    let loaded = load(&format!("config_version: 0\n{MODEL}"), &MapEnv::new()).expect("valid");
    assert_eq!(loaded.warnings.len(), 1);
    assert!(
        loaded.warnings[0].contains("older"),
        "{:?}",
        loaded.warnings
    );
    assert!(loaded.warnings[0].contains("v1:"), "{:?}", loaded.warnings);

    let loaded = load(MODEL, &MapEnv::new()).expect("valid");
    assert!(
        loaded.warnings[0].contains("no config_version"),
        "{:?}",
        loaded.warnings
    );

    let newer = format!("config_version: {}\n{MODEL}", CONFIG_VERSION + 1);
    let loaded = load(&newer, &MapEnv::new()).expect("valid");
    assert!(
        loaded.warnings[0].contains("newer"),
        "{:?}",
        loaded.warnings
    );

    let current = format!("config_version: {CONFIG_VERSION}\n{MODEL}");
    assert!(
        load(&current, &MapEnv::new())
            .expect("valid")
            .warnings
            .is_empty()
    );
}

#[test]
fn yaml_syntax_error_is_a_parse_error() {
    let error =
        load("models: [\n  api_key: sk-very-secret\n", &MapEnv::new()).expect_err("bad yaml");
    assert!(matches!(error, ConfigError::Parse { .. }), "{error}");
    assert!(!error.to_string().contains("sk-very-secret"), "{error}");
}

#[test]
fn missing_named_file_is_a_read_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let error = load_from_file(&dir.path().join("absent.yaml"), &MapEnv::new(), dir.path())
        .expect_err("absent file");
    assert!(matches!(error, ConfigError::Read { .. }), "{error}");
}

#[test]
fn config_check_exit_codes_and_output() {
    let dir = tempfile::tempdir().expect("tempdir");
    let good = dir.path().join("good.yaml");
    std::fs::write(&good, format!("config_version: 1\n{MODEL}")).expect("write");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        format!("{MODEL}    tempreature: 3\ngateway:\n  listen: x\n"),
    )
    .expect("write");

    let mut out = Vec::new();
    let code = run_check(Some(&good), &MapEnv::new(), dir.path(), &mut out);
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!(code, EXIT_OK, "{text}");
    assert!(
        text.starts_with(&format!("config OK: {}", good.display())),
        "{text}"
    );

    let mut out = Vec::new();
    let code = run_check(Some(&bad), &MapEnv::new(), dir.path(), &mut out);
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!(code, EXIT_CONFIG_INVALID);
    assert_eq!(code, 64);
    assert!(
        text.contains("models[0].tempreature: unknown key"),
        "{text}"
    );
    assert!(text.contains("gateway.listen: must be"), "{text}");
    assert_eq!(
        text.lines().count(),
        3,
        "a heading, then one line per problem: {text}"
    );
}

#[test]
fn config_check_without_a_file_checks_the_embedded_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut out = Vec::new();
    let code = run_check(None, &MapEnv::new(), dir.path(), &mut out);
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!(code, EXIT_OK, "{text}");
    assert!(text.contains("embedded default"), "{text}");
}

fn watched_config(model_id: &str) -> String {
    format!(
        "config_version: 1\nmodels:\n  - name: main\n    model: {model_id}\n    base_url: http://127.0.0.1:1/v1\n"
    )
}

/// Whether `expect` holds of the handle's config within a minute (checked every 10 ms).
async fn wait_for(handle: &ConfigHandle, expect: impl Fn(&AppConfig) -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        if expect(&handle.current()) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn hot_reload_applies_valid_changes_and_keeps_config_on_invalid_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, watched_config("first")).expect("write");
    let env = MapEnv::new();
    let loaded = load_from_file(&path, &env, dir.path()).expect("valid");
    let handle = ConfigHandle::fixed(loaded.config);
    let cancel = CancellationToken::new();
    let task = ConfigWatcher::new(&path, handle.clone(), Arc::new(env))
        .with_cwd(dir.path())
        .with_interval(Duration::from_millis(20))
        .spawn(cancel.clone());

    std::fs::write(&path, watched_config("second")).expect("write");
    assert!(
        wait_for(&handle, |c| c.models[0].model == "second").await,
        "valid change picked up"
    );

    std::fs::write(
        &path,
        format!("{}    tempreature: 1\n", watched_config("third")),
    )
    .expect("write");
    // A poll saw the invalid file and rejected it: the running config stays.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while handle.last_reload().map(|r| r.outcome) != Some("rejected") {
        assert!(tokio::time::Instant::now() < deadline, "never rejected");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(handle.current().models[0].model, "second");

    std::fs::write(&path, watched_config("fourth")).expect("write");
    assert!(
        wait_for(&handle, |c| c.models[0].model == "fourth").await,
        "recovers after the file is fixed"
    );

    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(60), task)
        .await
        .expect("watcher stops on cancel")
        .expect("watcher task did not panic");
}

#[tokio::test]
async fn poll_once_reports_each_outcome() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, watched_config("a")).expect("write");
    let env = MapEnv::new();
    let handle = ConfigHandle::fixed(
        load_from_file(&path, &env, dir.path())
            .expect("valid")
            .config,
    );
    let mut watcher = ConfigWatcher::new(&path, handle.clone(), Arc::new(env)).with_cwd(dir.path());

    assert_eq!(watcher.poll_once().await, PollOutcome::Unchanged);
    std::fs::write(&path, "models: [{name: main, model: b, base_url: $NOPE}]\n").expect("write");
    assert_eq!(watcher.poll_once().await, PollOutcome::Rejected);
    assert_eq!(
        watcher.poll_once().await,
        PollOutcome::Unchanged,
        "a rejected version is not retried"
    );
    assert_eq!(handle.current().models[0].model, "a");
    std::fs::remove_file(&path).expect("remove");
    assert_eq!(watcher.poll_once().await, PollOutcome::Unreadable);
    std::fs::write(&path, watched_config("c")).expect("write");
    assert_eq!(watcher.poll_once().await, PollOutcome::Reloaded);
    assert_eq!(handle.current().models[0].model, "c");
}

#[test]
fn a_channel_section_loads_into_its_adapter_and_reports_problems_by_key() {
    let env = MapEnv::new().with("TG_TOKEN", "123:abc");
    let yaml = format!(
        "{MODEL}channels:\n  telegram:\n    enabled: true\n    bot_token: $TG_TOKEN\n    mode: webhook\n    webhook_url: https://bot.example.com/channels/telegram/webhook\n    webhook_secret: s3cret\n    allowed_users: [1, \"2\"]\n    allowed_chats: [-100]\n    admins: [1]\n    group_policy: all\n    reactions: true\n  session:\n    agent: helper\n  stream:\n    min_interval: 0.5\n"
    );
    let config = load_ok(&yaml, &env);
    let telegram = &config.channels.telegram;
    assert_eq!(
        telegram.bot_token.as_ref().map(|t| t.expose()),
        Some("123:abc")
    );
    assert_eq!(telegram.allowed_users, ["1", "2"]);
    assert_eq!(telegram.allowed_chats, ["-100"]);
    assert!(telegram.reactions);
    assert_eq!(config.channels.default_agent("telegram"), Some("helper"));
    assert_eq!(config.channels.stream.min_interval, Some(0.5));
    assert!(
        !format!("{telegram:?}").contains("123:abc"),
        "the token is redacted"
    );

    let typo = format!("{MODEL}channels:\n  telegram:\n    bot_tokn: x\n");
    let found = problems(&typo, &env);
    assert!(found.iter().any(|p| p.contains("bot_tokn")), "{found:?}");

    let incomplete = format!(
        "{MODEL}channels:\n  telegram:\n    enabled: true\n    mode: webhook\n    webhook_secret: \"not valid!\"\n"
    );
    let found = problems(&incomplete, &env);
    for key in ["bot_token", "webhook_url", "webhook_secret"] {
        assert!(
            found
                .iter()
                .any(|p| p.starts_with(&format!("channels.telegram.{key}:"))),
            "{key} missing from {found:?}"
        );
    }
}

/// `docs/configuration.md` is `antler config reference`'s output: a config struct or doc
/// comment changed without regenerating it fails here, with the command that fixes it.
#[test]
fn the_checked_in_configuration_reference_is_current() {
    use antler::config::reference::{REFERENCE_PATH, REGENERATE_COMMAND};
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_antler"))
        .args(["config", "reference"])
        .output()
        .expect("run antler config reference");
    assert!(output.status.success(), "{output:?}");
    let generated = String::from_utf8(output.stdout).expect("UTF-8 Markdown");
    assert!(generated.contains("## `gateway`"), "{generated}");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(REFERENCE_PATH);
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    if generated != checked_in {
        let first_difference = generated
            .lines()
            .zip(checked_in.lines())
            .position(|(new, old)| new != old)
            .unwrap_or(generated.lines().count().min(checked_in.lines().count()));
        panic!(
            "{REFERENCE_PATH} is stale (first difference at line {}: now {:?}). Regenerate it \
             from the repository root with:\n\n    {REGENERATE_COMMAND}\n",
            first_difference + 1,
            generated
                .lines()
                .nth(first_difference)
                .unwrap_or("<end of file>"),
        );
    }
}

#[test]
fn a_channel_secret_of_the_wrong_type_is_not_echoed() {
    let text = format!("{MODEL}channels:\n  telegram:\n    bot_token: 987654321\n");
    let problems = problems(&text, &MapEnv::new());
    let problem = problems
        .iter()
        .find(|p| p.contains("channels.telegram.bot_token"))
        .unwrap_or_else(|| panic!("no bot_token problem in {problems:?}"));
    assert!(problem.contains("not shown"), "{problem}");
    assert!(!problem.contains("987654321"), "{problem}");
}

/// A key that really starts with `$` reads as a reference; whatever it is, its text is never
/// printed (`config check` names the key and the `$$` escape), and `$$` is a literal `$`.
#[test]
fn a_secret_that_starts_with_a_dollar_is_never_echoed_and_doubling_it_is_the_literal() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("config.yaml");
    std::fs::write(
        &file,
        format!("config_version: 1\n{MODEL}    api_key: \"$uperSecret42\"\n"),
    )
    .expect("write");
    let mut out = Vec::new();
    let code = run_check(Some(&file), &MapEnv::new(), dir.path(), &mut out);
    let text = String::from_utf8(out).expect("utf-8");
    assert_eq!(code, EXIT_CONFIG_INVALID, "{text}");
    assert!(
        text.contains("models[0].api_key: refers to an environment variable that is not set"),
        "{text}"
    );
    assert!(text.contains("$$"), "the escape is offered: {text}");
    assert!(!text.contains("uperSecret42"), "{text}");

    let config = load_ok(
        &format!("{MODEL}    api_key: \"$$uperSecret42\"\n"),
        &MapEnv::new(),
    );
    let key = config.models[0].api_key.as_ref().expect("a key");
    assert_eq!(key.expose(), "$uperSecret42");
}

#[test]
fn approvals_load_from_yaml_and_report_problems_by_key() {
    let base = "config_version: 1\nmodels:\n  - name: m\n    model: x\n    base_url: http://127.0.0.1:1/v1\n";
    let config = load_ok(
        &format!(
            "{base}approvals:\n  tools: [bash, \"mcp:github_*\"]\n  approvers: [alice, bob]\n  timeout_minutes: 5\n"
        ),
        &MapEnv::new(),
    );
    assert_eq!(config.approvals.tools, ["bash", "mcp:github_*"]);
    assert_eq!(
        config.approvals.approvers,
        antler::config::approvals::ApproversSetting::Users(vec!["alice".into(), "bob".into()])
    );
    assert_eq!(
        config.approvals.when_untrusted,
        [
            "bash",
            "web_fetch",
            "group:mcp",
            "write_file",
            "str_replace"
        ],
        "the default stays while only other keys are set"
    );
    let config = load_ok(
        &format!("{base}approvals:\n  approvers: admins\n"),
        &MapEnv::new(),
    );
    assert_eq!(
        config.approvals.approvers,
        antler::config::approvals::ApproversSetting::Named(
            antler::config::approvals::ApproverKind::Admins
        )
    );
    assert_eq!(
        paths(&format!(
            "{base}approvals:\n  when_untrusted: [\"group:nope\"]\n  timeout_minutes: 0\n"
        )),
        ["approvals.when_untrusted[0]", "approvals.timeout_minutes"]
    );
}
