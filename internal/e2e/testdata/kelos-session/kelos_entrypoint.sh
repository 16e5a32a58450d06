#!/bin/sh
# The Kelos interface as a test image keeps it (seeds/003): the prompt is
# $1; with KELOS_SESSION_SETUP_ONLY=1 and no prompt the entrypoint only
# prepares (here: sets git's identity, says so, and counts its setups
# where the provider's state is, CLAUDE_CONFIG_DIR on the session's
# volume) and exits 0.
set -u
# Who the agent commits as, as an image of the interface sets it up.
git config --global user.name "Kelos test agent" && git config --global user.email "agent@kelos.test" || exit 1
if [ -n "${KELOS_SESSION_SETUP_ONLY:-}" ]; then
	echo "kelos-test: session setup for ${KELOS_AGENT_TYPE:-?}, $# arguments"
	[ "$#" -eq 0 ] || { echo "kelos-test: a session's setup takes no prompt" >&2; exit 2; }
	mkdir -p "${CLAUDE_CONFIG_DIR:?}" || exit 1
	date -u +%s >>"$CLAUDE_CONFIG_DIR/kelos-setups"
	exit 0
fi
echo "kelos-test: the agent started by the entrypoint"
exec claude -p --dangerously-skip-permissions --verbose --output-format stream-json --model "${KELOS_MODEL:?}" "$1"
