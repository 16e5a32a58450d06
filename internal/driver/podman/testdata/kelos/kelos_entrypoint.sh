#!/bin/bash
# A Kelos-shaped entrypoint for berth's real-podman test: it runs the setup
# command with its banners, says on stdout (one JSON line) what the
# interface promised it, works in the repository, and ends with an output
# block, as seeds/003 describes.
set -uo pipefail

if [ -n "${KELOS_SETUP_COMMAND-}" ]; then
	echo "---KELOS_SETUP_COMMAND_START---" >&2
	mapfile -t setup < <(jq -r '.[]' <<<"$KELOS_SETUP_COMMAND")
	if ! "${setup[@]}"; then
		echo "---KELOS_SETUP_COMMAND_FAILED---" >&2
		exit 1
	fi
	echo "---KELOS_SETUP_COMMAND_DONE---" >&2
fi

root=rw
touch /usr/.berth-probe 2>/dev/null || root=ro
# $1 whole by its digest; itself too when it is short enough to read.
prompt_bytes=$(printf %s "${1-}" | wc -c)
prompt_sha256=$(printf %s "${1-}" | sha256sum | cut -d' ' -f1)
prompt=${1-}
[ "$prompt_bytes" -le 4096 ] || prompt=
jq -cn \
	--arg prompt "$prompt" --argjson prompt_bytes "$prompt_bytes" --arg prompt_sha256 "$prompt_sha256" --argjson args "$#" \
	--argjson uid "$(id -u)" --argjson gid "$(id -g)" \
	--arg cwd "$PWD" --arg home "$HOME" \
	--arg agent_type "${KELOS_AGENT_TYPE-}" --arg model "${KELOS_MODEL-}" \
	--arg setup "${KELOS_SETUP_COMMAND-}" --arg setup_file "$(cat "$HOME/setup.txt" 2>/dev/null)" \
	--arg root "$root" --arg cap_eff "$(awk '/^CapEff:/ {print $2}' /proc/self/status)" \
	--arg agents_md "${KELOS_AGENTS_MD-}" --arg effort "${KELOS_EFFORT-}" --arg plugin_dir "${KELOS_PLUGIN_DIR-}" \
	--arg plugin_files "$( [ -n "${KELOS_PLUGIN_DIR-}" ] && cd "$KELOS_PLUGIN_DIR" 2>/dev/null && find . -type f | sort | tr '\n' ' ')" \
	'{type: "kelos-test", prompt: $prompt, prompt_bytes: $prompt_bytes, prompt_sha256: $prompt_sha256, args: $args, uid: $uid, gid: $gid, cwd: $cwd, home: $home,
	  agent_type: $agent_type, model: $model, setup: $setup, setup_file: $setup_file, root: $root, cap_eff: $cap_eff,
	  agents_md: $agents_md, effort: $effort, plugin_dir: $plugin_dir, plugin_files: $plugin_files}'

echo "hello from a kelos image" >kelos.txt
git add kelos.txt
git -c user.name=kelos -c user.email=kelos@example.invalid commit -q -m "kelos test" || exit 3

echo "---KELOS_OUTPUTS_START---"
echo "commit: $(git rev-parse HEAD)"
echo "input-tokens: 12"
echo "a line without a key"
echo "---KELOS_OUTPUTS_END---"
