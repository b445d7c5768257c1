// The MCP conformance suite's client command for Antler: maps the scenario the suite names
// (MCP_CONFORMANCE_SCENARIO) to the tool to call, turns its context (MCP_CONFORMANCE_CONTEXT:
// client_id, client_secret, private_key_pem, signing_algorithm) into an extensions_config.json
// entry, and runs `antler mcp probe URL` in a temporary home. Run by the suite's own Node
// (ANTLER_BIN names the antler binary); the server URL is the last argument.
import { spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const url = process.argv.at(-1);
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? "";
const context = process.env.MCP_CONFORMANCE_CONTEXT
  ? JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT)
  : null;
const antler = process.env.ANTLER_BIN;
if (!antler) {
  console.error("client.mjs: set ANTLER_BIN to the antler binary");
  process.exit(2);
}

// The tool each scenario's server offers (the auth scenarios' servers all offer `test-tool`).
const tools = {
  initialize: null,
  tools_call: { tool: "add_numbers", args: { a: 5, b: 3 } },
  "elicitation-sep1034-client-defaults": { tool: "test_client_elicitation_defaults", args: {} },
  "sse-retry": { tool: "test_reconnection", args: {} },
};
const call = scenario in tools ? tools[scenario] : { tool: "test-tool", args: {} };

const home = mkdtempSync(join(tmpdir(), "antler-conformance-"));
const args = ["mcp", "probe", url];
if (call) args.push("--tool", call.tool, "--args", JSON.stringify(call.args));
if (scenario === "elicitation-sep1034-client-defaults") {
  args.push("--elicitation", "accept-defaults");
}
if (scenario.startsWith("auth/")) {
  writeFileSync(
    join(home, "extensions_config.json"),
    JSON.stringify({ mcpServers: { conformance: { type: "http", url, oauth: oauth() } } }, null, 2),
  );
  args.push("--server", "conformance");
}

// What a browser does with an authorization server that approves at once: GET the URL and
// follow the redirects (to the loopback redirect Antler listens on).
const browser = join(home, "browser");
const fetcher = join(dirname(fileURLToPath(import.meta.url)), "browser.mjs");
writeFileSync(browser, `#!/bin/sh\nexec "${process.execPath}" "${fetcher}" "$@"\n`);
chmodSync(browser, 0o755);

const env = {
  ...process.env,
  ANTLER_HOME: home,
  ANTLER_EXTENSIONS_CONFIG: join(home, "extensions_config.json"),
  BROWSER: browser,
  NO_PROXY: "127.0.0.1,localhost",
  no_proxy: "127.0.0.1,localhost",
};
delete env.ANTLER_CONFIG;
const run = spawnSync(antler, args, { cwd: home, env, stdio: "inherit" });
rmSync(home, { recursive: true, force: true });
process.exit(run.status ?? 2);

/** The entry's `oauth` block: the context's client when the scenario gives one, else an
 *  authorization-code client registered dynamically or by its metadata document. */
function oauth() {
  if (!context) {
    return {
      grant_type: "authorization_code",
      client_metadata_url: "https://conformance-test.local/client-metadata.json",
    };
  }
  const settings = {
    grant_type: scenario.startsWith("auth/client-credentials-")
      ? "client_credentials"
      : "authorization_code",
    client_id: context.client_id,
  };
  if (context.client_secret) settings.client_secret = context.client_secret;
  if (context.private_key_pem) settings.private_key = context.private_key_pem;
  if (context.signing_algorithm) settings.signing_algorithm = context.signing_algorithm;
  return settings;
}
