#!/bin/bash
# The egress probe's entrypoint. A setup command (KELOS_SETUP_COMMAND, a
# JSON array) runs first between the Kelos banners, on stderr, as a Kelos
# image runs it; then the task ($1) is a bash script, run in the checkout
# with everything it prints on stdout, where the run's log keeps it. The
# script's markers are what the test reads.
if [ -n "${KELOS_SETUP_COMMAND-}" ]; then
	echo "---KELOS_SETUP_COMMAND_START---" >&2
	mapfile -t setup < <(jq -r '.[]' <<<"$KELOS_SETUP_COMMAND")
	if ! "${setup[@]}" >&2; then
		echo "---KELOS_SETUP_COMMAND_FAILED---" >&2
		exit 1
	fi
	echo "---KELOS_SETUP_COMMAND_DONE---" >&2
fi
exec bash -c "${1-}" 2>&1
