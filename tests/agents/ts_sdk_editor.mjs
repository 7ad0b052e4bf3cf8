// What both TypeScript SDK clients (ts_sdk_client.mjs, ts_sdk_v2_client.mjs) do alike as the editor: read their
// arguments (SDK_ENTRY_JS CONFIG_JSON), start config.command with config.cwd and config.env, connect the SDK's
// client to it (every session/update kept, permission requests cancelled), run the script's own exchange, then end
// the agent's input and print one JSON object: what the exchange returned, the updates and the agent's exit code.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

// exchange(agent, acp, config): the script's requests, given the connected agent, the SDK module and the config.
export const runEditor = async (exchange) => {
  const [entry, configText] = process.argv.slice(2);
  const acp = await import(pathToFileURL(entry).href);
  const config = JSON.parse(configText);

  const child = spawn(config.command[0], config.command.slice(1), {
    cwd: config.cwd,
    env: config.env,
    stdio: ["pipe", "pipe", "inherit"],
  });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

  const updates = [];
  const app = acp
    .client()
    .onNotification("session/update", ({ params }) => {
      updates.push({ sessionId: params.sessionId, kind: params.update.sessionUpdate, update: params.update });
    })
    .onRequest("session/request_permission", () => ({ outcome: { outcome: "cancelled" } }));

  const report = await app.connectWith(stream, (agent) => exchange(agent, acp, config));

  child.stdin.end();
  const exitCode = await new Promise((resolve) => child.on("exit", (code, signal) => resolve(signal ?? code)));
  process.stdout.write(JSON.stringify({ ...report, updates, exitCode }) + "\n");
};
