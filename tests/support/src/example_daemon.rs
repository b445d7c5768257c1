//! The real daemon binary as the `fake_*` examples start it: a config with the scripted model,
//! the local sandbox and the example's `channels:` section written to `<dir>/config.yaml`,
//! `antler run` logging to `<dir>/antler.log`, killed with the example.

use std::path::Path;

use crate::FakeOpenAi;

/// Starts `binary` on a config for `model`, listening on `listen` (`127.0.0.1:0`, or a port the
/// example calls), with `channels` (the keys under `channels:`, indented two spaces).
pub fn start_example_daemon(
    binary: &str,
    dir: &Path,
    model: &FakeOpenAi,
    listen: &str,
    channels: &str,
) -> tokio::process::Child {
    let config = format!(
        "config_version: 1\ndata_dir: {data}\nmodels:\n  - name: fake\n    provider: openai\n    model: fake-model\n    base_url: {model}\nsandbox:\n  provider: local\ngateway:\n  listen: {listen}\nchannels:\n{channels}",
        data = dir.join("data").display(),
        model = model.base_url(),
    );
    let config_path = dir.join("config.yaml");
    std::fs::write(&config_path, config).expect("write config");
    let log = std::fs::File::create(dir.join("antler.log")).expect("log file");
    tokio::process::Command::new(binary)
        .arg("--config")
        .arg(&config_path)
        .arg("run")
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .expect("start antler")
}

/// A port free on 127.0.0.1 now, for an example that must know the daemon's address.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}
