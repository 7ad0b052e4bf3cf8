// An ACP proxy chain as one agent on stdio: @thinkwell/conductor (npm) starts each component, tells every one but
// the last that it is a proxy, and routes between them; the editor sees a single agent. Put it where an editor
// starts an agent (Zed: "agent_servers"), one argument per component, the agent last:
//
//   node conductor_chain.mjs "acp-registry proxy" "claude-agent-acp"
//
// Each argument is a command line (split at spaces; quote a part that holds one). The conductor is imported from
// beside this file (`npm install @thinkwell/conductor@0.5.7` there), or from $THINKWELL_CONDUCTOR (its dist/index.js).
//
// Each component runs in a process group of its own, and the chain ends each group as a whole: an agent started
// by a launcher (codex-acp's npm command is a node script that runs a native program) leaves nothing behind when
// the chain ends - whether the editor closes stdin, or this process is sent SIGTERM, SIGINT or SIGHUP.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

const where = process.env.THINKWELL_CONDUCTOR;
const { Conductor, StdioConnector, fromConnectors } = await import(
  where ? pathToFileURL(where).href : "@thinkwell/conductor"
);

const components = process.argv.slice(2);
if (components.length === 0) {
  process.stderr.write('usage: node conductor_chain.mjs "PROXY COMMAND"... "AGENT COMMAND"\n');
  process.exit(2);
}

const STOP_AFTER = 250; // ms between the end of a component's stdin and SIGTERM to its group (the conductor's own)
const KILL_AFTER = 500; // ms between SIGTERM and SIGKILL
const groups = new Set(); // the process groups started (each its leader's pid), until each is gone

function signalGroup(group, signal) {
  try {
    process.kill(-group, signal);
    return true;
  } catch {
    groups.delete(group); // ESRCH: nothing of it is left
    return false;
  }
}

const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The conductor's stdio connection, but for a component that leads a process group of its own.
class GroupConnection {
  constructor(child) {
    this.child = child;
    this.closed = false;
    this.exited = new Promise((resolve) => child.once("exit", resolve));
    this.lines = createInterface({ input: child.stdout, crlfDelay: Infinity });
    child.once("exit", () => {
      this.closed = true;
    });
  }

  send(message) {
    if (this.closed) throw new Error("Connection is closed");
    this.child.stdin.write(JSON.stringify(message) + "\n");
  }

  get messages() {
    const lines = this.lines;
    return (async function* () {
      for await (const line of lines) {
        if (!line.trim()) continue;
        try {
          yield JSON.parse(line);
        } catch (error) {
          process.stderr.write(`conductor_chain: a line that is not JSON from a component: ${line.slice(0, 200)}\n`);
        }
      }
    })();
  }

  // stdin closed first (a component ends by itself on EOF, writing what it must), then the whole group: SIGTERM,
  // SIGKILL - also what the component's leader left running when it exited.
  async close() {
    if (this.ending) return this.ending;
    this.closed = true;
    this.lines.close();
    this.child.stdin.end();
    const group = this.child.pid;
    this.ending = (async () => {
      await Promise.race([this.exited, pause(STOP_AFTER)]);
      if (!signalGroup(group, "SIGTERM")) return;
      for (let waited = 0; waited < KILL_AFTER; waited += 25) {
        await pause(25);
        if (!signalGroup(group, 0)) return;
      }
      signalGroup(group, "SIGKILL");
    })();
    return this.ending;
  }
}

class GroupConnector {
  constructor(commandLine) {
    this.options = new StdioConnector(commandLine).options; // the conductor's own way of splitting a command line
    this.connection = null;
  }

  async connect() {
    const { command, args = [] } = this.options;
    const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"], detached: true });
    await new Promise((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", reject);
    });
    groups.add(child.pid);
    this.connection = new GroupConnection(child);
    return this.connection;
  }
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

const connectors = components.map((command) => new GroupConnector(command));
const conductor = new Conductor({ instantiator: fromConnectors(connectors.at(-1), connectors.slice(0, -1)) });

// Every group still there is ended before this process goes (components in groups of their own get no signal
// from a terminal or from whoever signals this process).
async function endAll() {
  await conductor.shutdown();
  await Promise.all(connectors.map((connector) => connector.connection?.close()));
  for (const group of groups) signalGroup(group, "SIGKILL");
}

for (const [signal, number] of [["SIGTERM", 15], ["SIGINT", 2], ["SIGHUP", 1]]) {
  process.once(signal, () => {
    endAll().finally(() => process.exit(128 + number));
  });
}

// Runs until the editor closes stdin; the conductor then ends every component, and this process when they are gone.
await conductor.connect(editor);
await endAll();
