#!/bin/bash
# A Model Context Protocol server over stdio for berth's tests, in what
# every agent image has (bash and jq): one tool, probe, whose answer
# carries PROBE_MARKER from its environment. A test that finds the marker
# in the model's next request knows the CLI started this server with the
# configured environment, offered its tool, called it and gave the model
# its answer. Newline-delimited JSON-RPC 2.0, the MCP stdio transport.
while IFS= read -r line; do
	id=$(jq -c '.id // empty' <<<"$line" 2>/dev/null) || continue
	[ -n "$id" ] || continue # a notification: nothing to answer
	method=$(jq -r '.method // ""' <<<"$line")
	case $method in
	initialize)
		result=$(jq -c '{protocolVersion: (.params.protocolVersion // "2025-06-18"),
			capabilities: {tools: {listChanged: false}}, serverInfo: {name: "berth-probe", version: "1.0.0"}}' <<<"$line") ;;
	tools/list)
		result='{"tools":[{"name":"probe","description":"Answers with the probe marker.","inputSchema":{"type":"object","properties":{"word":{"type":"string"}}}}]}' ;;
	tools/call)
		result=$(jq -c --arg m "${PROBE_MARKER:-no-marker}" \
			'{content: [{type: "text", text: ("probe answers " + $m + " " + (.params.arguments.word // ""))}], isError: false}' <<<"$line") ;;
	ping)
		result='{}' ;;
	*)
		jq -nc --argjson id "$id" --arg m "$method" '{jsonrpc: "2.0", id: $id, error: {code: -32601, message: ("no method " + $m)}}'
		continue ;;
	esac
	jq -nc --argjson id "$id" --argjson r "$result" '{jsonrpc: "2.0", id: $id, result: $r}'
done
