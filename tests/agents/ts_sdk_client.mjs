// The official TypeScript ACP SDK (@agentclientprotocol/sdk 2.4, from the agents cache `make agents` fills) as the
// editor in front of `acp-registry proxy`: initialize, session/new, session/prompt, session/list walked with its
// cursor, session/delete, session/list again. It prints one JSON object with what the SDK client observed;
// tests/test_real_agents_sdk.py checks it. Usage:
//   node ts_sdk_client.mjs SDK_ENTRY_JS CONFIG_JSON
// SDK_ENTRY_JS: the SDK's stable v1 entry point (a file path); CONFIG_JSON: {"command": [...], "cwd": "...",
// "env": {...}, "prompts": ["...", ...], "authenticate": "methodId" | null}.
import { runEditor } from "./ts_sdk_editor.mjs";

await runEditor(async (agent, acp, config) => {
  const init = await agent.request("initialize", {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    clientInfo: { name: "ts-sdk-e2e", version: "1" },
  });
  if (config.authenticate) {
    await agent.request("authenticate", { methodId: config.authenticate });
  }
  const sessions = [];
  for (const text of config.prompts) {
    // The SDK's session helper: session/new, then a prompt whose text it reads until the turn stops.
    const active = await agent.buildSession(config.cwd).start();
    await active.prompt(text);
    let reply = "";
    for (;;) {
      const message = await active.nextUpdate();
      if (message.kind === "stop") {
        sessions.push({ sessionId: active.sessionId, stopReason: message.stopReason, reply });
        break;
      }
      if (message.update.sessionUpdate === "agent_message_chunk" && message.update.content.type === "text") {
        reply += message.update.content.text;
      }
    }
    active.dispose();
  }
  const walk = async () => {
    const pages = [];
    let cursor;
    do {
      const page = await agent.request("session/list", cursor ? { cursor } : {});
      pages.push(page);
      cursor = page.nextCursor ?? undefined;
    } while (cursor && pages.length < 100);
    return pages;
  };
  const pagesBefore = await walk();
  let badCursor = null;
  try {
    await agent.request("session/list", { cursor: "not-a-cursor" });
  } catch (error) {
    badCursor = { code: error.code, message: error.message };
  }
  const deleted = sessions[0].sessionId;
  const deleteResult = await agent.request("session/delete", { sessionId: deleted });
  const pagesAfter = await walk();
  return { init, sessions, pagesBefore, badCursor, deleted, deleteResult, pagesAfter };
});

