// The official TypeScript ACP SDK's ACP v2 client (@agentclientprotocol/sdk 2.4, its `/experimental/v2/unstable`
// entry point, from the agents cache `make agents` fills) as the editor in front of `acp-registry proxy`: initialize
// with protocolVersion 2, session/new, a prompt (read until the agent reports the session idle), session/list,
// session/set_title, session/status, session/archive and the list of archived sessions. It prints one JSON object
// with what the SDK client observed; tests/test_real_agents_v2.py checks it. Usage:
//   node ts_sdk_v2_client.mjs SDK_V2_ENTRY_JS CONFIG_JSON
// CONFIG_JSON: {"command": [...], "cwd": "...", "env": {...}, "prompt": "..."}.
import { runEditor } from "./ts_sdk_editor.mjs";

const attempt = async (call) => {
  try {
    return { result: await call() };
  } catch (error) {
    return { error: { code: error.code, message: error.message } };
  }
};

await runEditor(async (agent, acp, config) => {
  const init = await agent.request("initialize", {
    protocolVersion: acp.PROTOCOL_VERSION,
    info: { name: "ts-sdk-v2-e2e", version: "1" },
    capabilities: {},
  });
  const active = await agent.buildSession(config.cwd).start();
  await active.prompt(config.prompt);
  let reply = "";
  let stopReason = null;
  for (;;) {
    const message = await active.nextUpdate();
    if (message.kind === "stop") {
      stopReason = message.stopReason ?? null;
      break;
    }
    const update = message.update;
    if ((update.sessionUpdate === "agent_message_chunk" || update.sessionUpdate === "agent_message")
        && update.content?.type === "text") {
      reply += update.content.text;
    }
  }
  const sessionId = active.sessionId;
  active.dispose();
  const listed = await attempt(() => agent.request("session/list", {}));
  const titled = await attempt(() => agent.request("session/set_title", { sessionId, title: "Named in v2" }));
  const status = await attempt(() => agent.request("session/status", { sessionId }));
  const archived = await attempt(() => agent.request("session/archive", { sessionId }));
  const listedArchived = await attempt(() => agent.request("session/list", { archived: "only" }));
  return { protocolVersion: acp.PROTOCOL_VERSION, init, sessionId, reply, stopReason, listed, titled, status,
    archived, listedArchived };
});

