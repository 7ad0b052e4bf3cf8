// An ACP proxy chain as one agent on stdio: @thinkwell/conductor (npm) starts each component, tells every one but
// the last that it is a proxy, and routes between them; the editor sees a single agent. Put it where an editor
// starts an agent (Zed: "agent_servers"), one argument per component, the agent last:
//
//   node conductor_chain.mjs "acp-registry proxy" "claude-agent-acp"
//
// Each argument is a command line (split at spaces; quote a part that holds one). The conductor is imported from
// beside this file (`npm install @thinkwell/conductor@0.5.7` there), or from $THINKWELL_CONDUCTOR (its dist/index.js).
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const where = process.env.THINKWELL_CONDUCTOR;
const { Conductor, fromCommands } = await import(where ? pathToFileURL(where).href : "@thinkwell/conductor");

const components = process.argv.slice(2);
if (components.length === 0) {
  process.stderr.write('usage: node conductor_chain.mjs "PROXY COMMAND"... "AGENT COMMAND"\n');
  process.exit(2);
}

// The editor's side of the conductor: JSON-RPC lines on this process's stdin and stdout.
const editor = {
  async connect() {
    const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
    return {
      messages: (async function* () {
        for await (const line of lines) {
          if (line.trim()) yield JSON.parse(line);
        }
      })(),
      send(message) {
        process.stdout.write(JSON.stringify(message) + "\n");
      },
      async close() {
        lines.close();
      },
    };
  },
};

// Runs until the editor closes stdin; the conductor then ends every component, and this process when they are gone.
await new Conductor({ instantiator: fromCommands(components) }).connect(editor);
