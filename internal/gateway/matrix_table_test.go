package gateway_test

import (
	"net/url"
	"strings"

	"berth.dev/berth/internal/api"
)

// The authorization matrix's expected table (SPEC S6, S17; issue 14). One
// row per route and request; a route with several requests worth asking
// has several rows. Each status is what that kind of caller must get, in
// this order:
//
//	op   the operator (a user of acme, the bootstrap organisation)
//	adm  an administrator of acme, the organisation of the sandboxes
//	xad  an administrator of organisation other
//	own  alice, a member of acme, who owns the sandboxes
//	mem  bob, another member of acme
//	xmb  sam, a member of other
//	eng  the own key of alice's engineer sandbox dev (token mode, on acme/app)
//	agt  the own key of alice's agent sandbox fix (its run under way in its machine)
//	rev  the own key of alice's reviewer run rev (under way)
//	rvk  a key of alice's, revoked
//	nil  no credential
//	bad  a key shaped like ours: a real key's id, a wrong secret
//
// Two callers more are not written: they expect what another does
// (derived), unless the row's sso or cut says otherwise, and why:
//
//	sso  alice's key from signing in through the identity provider
//	     (berth login --sso), and her panel signed in there: as own
//	cut  the keys of dora, who signed in through the provider (made at
//	     her first sign-in), which has cut her off since: as rvk
//
// "in" is the panel's 303 to its sign-in page. What a caller may not see is
// 404, never 403; 403 is for what the caller may see but not do; 401 for
// no key, a revoked one or garbage.
//
// {name} is an object of the world: {dev}, {agent}, {reviewed} (a reviewer
// run that ended with its verdict), {operator}, {owner} and {co-admin}
// (user ids), {owner-key} (alice's key), {acme} (the organisation's id),
// {ssh-key}; {new-…} is a fresh object for
// the cell (see fixtures), kept until a cell changes it. acme-only is a
// class only acme has; ml a project of acme's.
//
// Adding a route is adding its rows here: the test fails until every route
// has one.
func matrixRows() []row {
	const (
		anthropic = `{"model":"scripted-model","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
		count     = `{"model":"scripted-model","messages":[{"role":"user","content":"hi"}]}`
		chat      = `{"model":"scripted-model","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
		responses = `{"model":"scripted-model","max_output_tokens":64,"input":"hi"}`
		gemini    = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"maxOutputTokens":64}}`
		classFile = "sandboxes:\n  - name: applied-{n}\n    image: localhost/berth-sandbox:1\n    isolation: standard\n"
		settings  = `{"models":null,"budget_usd":null,"rate":null,"system_prompt":"matrix {n}"}`
		gitPack   = "0000" // a fetch that wants nothing: git's flush packet
		// redeemRoute is public: the invitation in its body is the credential.
		redeemRoute = "POST " + api.InvitationRedeemPath
		// mapping is acme's sign-in mapping, the groups of alice and dora
		// kept (ssoMapping): the panel's SSO caller signs in again after
		// signing out.
		mapping = `{"members":["acme-people","acme-contractors","matrix-{n}"],"administrators":["acme-admins"]}`
		// provider is where the panel sends a browser to sign in.
		provider = "https://idp.matrix.test/authorize?"
	)
	cli := url.Values{"port": {cliPort}, "challenge": {s256("the matrix's verifier")}, "state": {"matrix"}}
	badPort := url.Values{"port": {"80"}, "challenge": cli["challenge"], "state": cli["state"]}
	return []row{
		//      op  adm xad own mem xmb eng agt rev rvk nil bad
		{want: "200 200 200 200 200 200 200 200 200 200 200 200", route: "GET /healthz", req: get("/healthz")},
		{want: "200 200 200 200 200 200 200 200 200 200 200 200", route: "GET /openapi.yaml", req: get("/openapi.yaml")},
		{want: "200 403 403 403 403 403 403 403 403 401 401 401", route: "GET /metrics", req: get("/metrics")},

		// The control API: people's keys; a sandbox's own key is refused.
		{want: "200 200 200 200 200 200 200 200 200 401 401 401", route: "GET /api/v1/whoami", req: get("/api/v1/whoami")},
		{want: "200 200 200 200 200 200 403 403 403 401 401 401", route: "GET /api/v1/orgs", req: get("/api/v1/orgs")},
		{want: "201 403 403 403 403 403 403 403 403 401 401 401", route: "POST /api/v1/orgs", req: post("/api/v1/orgs", `{"name":"org-{n}"}`), watch: "organisations"},
		{want: "200 200 404 200 200 404 403 403 403 401 401 401", route: "GET /api/v1/orgs/{org}", req: get("/api/v1/orgs/acme")},
		{want: "200 200 404 200 200 404 403 403 403 401 401 401", route: "GET /api/v1/orgs/{org}", what: "by id", req: get("/api/v1/orgs/{acme}")},
		{want: "200 200 404 200 200 404 403 403 403 401 401 401", route: "GET /api/v1/orgs/{org}/projects", req: get("/api/v1/orgs/acme/projects")},
		{want: "201 201 404 403 403 404 403 403 403 401 401 401", route: "POST /api/v1/orgs/{org}/projects", req: post("/api/v1/orgs/acme/projects", `{"name":"prj-{n}"}`), watch: "acme's projects"},
		{want: "200 200 404 200 200 404 403 403 403 401 401 401", route: "GET /api/v1/orgs/{org}/users", req: get("/api/v1/orgs/acme/users")},
		{want: "201 201 404 403 403 404 403 403 403 401 401 401", route: "POST /api/v1/orgs/{org}/users", what: "a member", req: post("/api/v1/orgs/acme/users", `{"name":"usr-{n}","role":"member"}`),
			watch: "acme's users"},
		{want: "201 403 404 403 403 404 403 403 403 401 401 401", route: "POST /api/v1/orgs/{org}/users", what: "an operator", req: post("/api/v1/orgs/acme/users", `{"name":"usr-{n}","role":"operator"}`),
			watch: "acme's users"},
		{want: "200 200 404 403 403 404 403 403 403 401 401 401", route: "POST /api/v1/orgs/{org}/users/{user}/disable", what: "a member", req: post("/api/v1/orgs/acme/users/{new-member}/disable", "")},
		{want: "200 403 404 403 403 404 403 403 403 401 401 401", route: "POST /api/v1/orgs/{org}/users/{user}/disable", what: "an operator", req: post("/api/v1/orgs/acme/users/{new-operator}/disable", "")},
		{want: "200 200 404 403 403 404 403 403 403 401 401 401", route: "POST /api/v1/orgs/{org}/users/{user}/enable", req: post("/api/v1/orgs/acme/users/{new-disabled}/enable", "")},
		{want: "200 200 404 403 403 404 403 403 403 401 401 401", route: "PUT /api/v1/orgs/{org}/users/{user}/project", what: "a member, to ml",
			req: put("/api/v1/orgs/acme/users/{new-member}/project", `{"project":"ml"}`)},
		{want: "400 400 404 403 403 404 403 403 403 401 401 401", route: "PUT /api/v1/orgs/{org}/users/{user}/project", what: "to a project acme has not",
			req: put("/api/v1/orgs/acme/users/{new-member}/project", `{"project":"nope"}`), field: "project"},
		{want: "200 200 404 200 200 404 403 403 403 401 401 401", route: "GET /api/v1/orgs/{org}/guardrail", req: get("/api/v1/orgs/acme/guardrail")},
		{want: "200 200 404 403 403 404 403 403 403 401 401 401", route: "PUT /api/v1/orgs/{org}/guardrail", req: put("/api/v1/orgs/acme/guardrail", `{"max_sandboxes":{n},"allowed_repos":["acme"]}`),
			watch: "acme's guardrail"},
		{want: "200 200 404 200 200 404 403 403 403 401 401 401", route: "GET /api/v1/orgs/{org}/projects/{project}/guardrail", req: get("/api/v1/orgs/acme/projects/default/guardrail")},
		{want: "200 200 404 403 403 404 403 403 403 401 401 401", route: "PUT /api/v1/orgs/{org}/projects/{project}/guardrail", req: put("/api/v1/orgs/acme/projects/default/guardrail", `{"max_sandboxes":{n}}`),
			watch: "the default project's guardrail"},
		{want: "200 200 404 200 200 404 403 403 403 401 401 401", route: "GET /api/v1/orgs/{org}/agent-config", req: get("/api/v1/orgs/acme/agent-config")},
		{want: "200 200 404 403 403 404 403 403 403 401 401 401", route: "PUT /api/v1/orgs/{org}/agent-config",
			req: put("/api/v1/orgs/acme/agent-config", `{"instructions":"matrix {n}"}`), watch: "acme's agent configuration"},
		{want: "200 200 404 200 200 404 403 403 403 401 401 401", route: "GET /api/v1/orgs/{org}/projects/{project}/agent-config", req: get("/api/v1/orgs/acme/projects/default/agent-config")},
		{want: "200 200 404 403 403 404 403 403 403 401 401 401", route: "PUT /api/v1/orgs/{org}/projects/{project}/agent-config",
			req: put("/api/v1/orgs/acme/projects/default/agent-config", `{"instructions":"matrix {n}","effort":"low"}`), watch: "the default project's agent configuration"},
		{want: "200 200 404 200 200 404 403 403 403 401 401 401", route: "GET /api/v1/orgs/{org}/projects/{project}/secrets", req: get("/api/v1/orgs/acme/projects/default/secrets")},
		{want: "200 200 404 403 403 404 403 403 403 401 401 401", route: "PUT /api/v1/orgs/{org}/projects/{project}/secrets/{name}",
			req: put("/api/v1/orgs/acme/projects/default/secrets/MATRIX", `{"value":"v{n}","hosts":["api.example.com"]}`), watch: "the default project's secrets"},
		{want: "204 204 404 403 403 404 403 403 403 401 401 401", route: "DELETE /api/v1/orgs/{org}/projects/{project}/secrets/{name}",
			req: del("/api/v1/orgs/acme/projects/default/secrets/{new-secret}")},
		{want: "200 200 404 200 200 404 403 403 403 401 401 401", route: "GET /api/v1/orgs/{org}/projects/{project}/triggers", req: get("/api/v1/orgs/acme/projects/default/triggers")},
		{want: "200 200 404 200 200 404 403 403 403 401 401 401", route: "GET /api/v1/orgs/{org}/projects/{project}/triggers/{name}",
			req: get("/api/v1/orgs/acme/projects/default/triggers/standing")},
		{want: "200 200 404 403 403 404 403 403 403 401 401 401", route: "PUT /api/v1/orgs/{org}/projects/{project}/triggers/{name}",
			req: put("/api/v1/orgs/acme/projects/default/triggers/matrix", `{"on":"webhook","repo":"acme/app","daily_tokens":{n},"open_pr":false}`), watch: "the default project's triggers"},
		{want: "204 204 404 403 403 404 403 403 403 401 401 401", route: "DELETE /api/v1/orgs/{org}/projects/{project}/triggers/{name}",
			req: del("/api/v1/orgs/acme/projects/default/triggers/{new-trigger}")},
		// Webhooks are public: the signature is the credential, and none
		// here is signed, so whoever sends it is refused alike; an unknown
		// trigger's address is refused as a bad signature is.
		{want: "401 401 401 401 401 401 401 401 401 401 401 401", route: "POST " + api.GitHubHookPath,
			req: post(api.GitHubHookPath, `{"action":"labeled"}`), watch: "the default project's triggers"},
		{want: "401 401 401 401 401 401 401 401 401 401 401 401", route: "POST /hooks/v1/triggers/{id}",
			req: post("/hooks/v1/triggers/{new-trigger-id}", `{"title":"x"}`), watch: "the default project's triggers"},
		{want: "401 401 401 401 401 401 401 401 401 401 401 401", route: "POST /hooks/v1/triggers/{id}", what: "no such trigger",
			req: post("/hooks/v1/triggers/trg_nosuchtrigger", `{"title":"x"}`)},

		// Keys (issue 14, items 1 and 2): a person's keys are theirs; only
		// they and an operator mint them. Nobody below an operator sees or
		// touches an operator's keys (not found); an administrator sees
		// their organisation's members' and administrators' keys and may
		// revoke them, but may not mint one (forbidden): they invite.
		// carol ({co-admin}) is another administrator of acme.
		{want: "200 200 200 200 200 200 403 403 403 401 401 401", route: "GET /api/v1/keys", what: "one's own", req: get("/api/v1/keys")},
		{want: "200 404 404 404 404 404 403 403 403 401 401 401", route: "GET /api/v1/keys", what: "the operator's", req: get("/api/v1/keys?user={operator}")},
		{want: "200 200 404 200 404 404 403 403 403 401 401 401", route: "GET /api/v1/keys", what: "the owner's", req: get("/api/v1/keys?user={owner}")},
		{want: "200 200 404 404 404 404 403 403 403 401 401 401", route: "GET /api/v1/keys", what: "another administrator's", req: get("/api/v1/keys?user={co-admin}")},
		{want: "201 201 201 201 201 201 403 403 403 401 401 401", route: "POST /api/v1/keys", what: "for oneself", req: post("/api/v1/keys", `{"name":"mine"}`), watch: "owner's keys"},
		{want: "201 404 404 404 404 404 403 403 403 401 401 401", route: "POST /api/v1/keys", what: "for the operator", req: post("/api/v1/keys", `{"user":"{operator}"}`), watch: "operator's keys"},
		{want: "201 403 404 201 404 404 403 403 403 401 401 401", route: "POST /api/v1/keys", what: "for the owner", req: post("/api/v1/keys", `{"user":"{owner}"}`), watch: "owner's keys"},
		{want: "201 403 404 404 404 404 403 403 403 401 401 401", route: "POST /api/v1/keys", what: "for another administrator", req: post("/api/v1/keys", `{"user":"{co-admin}"}`),
			watch: "co-admin's keys"},
		{want: "204 204 404 204 404 404 403 403 403 401 401 401", route: "DELETE /api/v1/keys/{id}", what: "the owner's", req: del("/api/v1/keys/{new-owner-key}")},
		{want: "204 404 404 404 404 404 403 403 403 401 401 401", route: "DELETE /api/v1/keys/{id}", what: "the operator's", req: del("/api/v1/keys/{new-operator-key}")},
		{want: "204 204 404 404 404 404 403 403 403 401 401 401", route: "DELETE /api/v1/keys/{id}", what: "another administrator's", req: del("/api/v1/keys/{new-co-admin-key}")},

		// Invitations (issue 14, item 2): an administrator invites a user of
		// theirs who has never had a key; an operator anyone (a recovery
		// invitation). An operator is not found below operator.
		{want: "201 201 404 403 403 404 403 403 403 401 401 401", route: "POST /api/v1/orgs/{org}/users/{user}/invitation", what: "a user who never had a key",
			req: post("/api/v1/orgs/acme/users/{new-invitee}/invitation", `{}`)},
		{want: "201 403 404 403 403 404 403 403 403 401 401 401", route: "POST /api/v1/orgs/{org}/users/{user}/invitation", what: "a user whose key was revoked",
			req: post("/api/v1/orgs/acme/users/{new-former-keyholder}/invitation", `{}`)},
		{want: "201 403 404 403 403 404 403 403 403 401 401 401", route: "POST /api/v1/orgs/{org}/users/{user}/invitation", what: "the owner, who has keys",
			req: post("/api/v1/orgs/acme/users/{owner}/invitation", `{"ttl":"1h"}`), watch: "owner's invitations"},
		{want: "201 404 404 403 403 404 403 403 403 401 401 401", route: "POST /api/v1/orgs/{org}/users/{user}/invitation", what: "an operator",
			req: post("/api/v1/orgs/acme/users/{new-operator-invitee}/invitation", `{}`)},
		{want: "400 400 404 403 403 404 403 403 403 401 401 401", route: "POST /api/v1/orgs/{org}/users/{user}/invitation", what: "for 30 days",
			req: post("/api/v1/orgs/acme/users/{new-invitee}/invitation", `{"ttl":"30d"}`), field: "ttl"},
		// A ttl that is no duration is refused before anything is looked
		// up, as a body that is no JSON is: it says nothing of acme.
		{want: "400 400 400 400 400 400 403 403 403 401 401 401", route: "POST /api/v1/orgs/{org}/users/{user}/invitation", what: "for soon",
			req: post("/api/v1/orgs/acme/users/{new-invitee}/invitation", `{"ttl":"soon"}`), field: "ttl"},
		// Redeeming is public: the invitation is the credential, and the
		// caller's own key, sent as a bearer key, is ignored. At most 10
		// requests a minute per client address: each kind of caller has
		// its own (callerTransport), and these 10 rows fit.
		{want: "201 201 201 201 201 201 201 201 201 201 201 201", route: redeemRoute, what: "a live invitation",
			req: post(api.InvitationRedeemPath, `{"invitation":"{new-invitation}","key_name":"matrix"}`)},
		{want: "401 401 401 401 401 401 401 401 401 401 401 401", route: redeemRoute, what: "an unknown invitation", req: redeem("berth_inv_0123456789abcdef_NOSUCHINVITATION")},
		{want: "401 401 401 401 401 401 401 401 401 401 401 401", route: redeemRoute, what: "garbage", req: redeem("let me in")},
		{want: "401 401 401 401 401 401 401 401 401 401 401 401", route: redeemRoute, what: "a live invitation's id, a wrong secret", req: redeem("{new-wrong-secret}")},
		{want: "401 401 401 401 401 401 401 401 401 401 401 401", route: redeemRoute, what: "a key", req: redeem("{owner-key}"), watch: "owner's keys"},
		{want: "409 409 409 409 409 409 409 409 409 409 409 409", route: redeemRoute, what: "used", req: redeem("{new-used-invitation}")},
		{want: "409 409 409 409 409 409 409 409 409 409 409 409", route: redeemRoute, what: "replaced", req: redeem("{new-replaced-invitation}")},
		{want: "409 409 409 409 409 409 409 409 409 409 409 409", route: redeemRoute, what: "expired", req: redeem("{new-expired-invitation}")},
		{want: "400 400 400 400 400 400 400 400 400 400 400 400", route: redeemRoute, what: "no JSON",
			req: post(api.InvitationRedeemPath, `{"invitation":`), field: "body"},
		{want: "413 413 413 413 413 413 413 413 413 413 413 413", route: redeemRoute, what: "over 4 KiB",
			req: redeem(strings.Repeat("x", 4<<10)), field: "body"},

		// Signing in through the identity provider (issue 20). Whether the
		// gateway has one is public; so is berth login --sso's code
		// exchange: the code and its PKCE verifier are the credential, the
		// caller's key is ignored. The exchange is limited per client
		// address (10 a minute), apart from the invitations' limit.
		{want: "200 200 200 200 200 200 200 200 200 200 200 200", route: "GET " + api.SSOPath, req: get(api.SSOPath), says: `"enabled": true`},
		{want: "401 401 401 401 401 401 401 401 401 401 401 401", route: "POST " + api.SSOTokenPath, what: "an unknown code",
			req: post(api.SSOTokenPath, `{"code":"NOSUCHCODE","verifier":"`+strings.Repeat("v", 43)+`"}`)},
		// berth login --sso --device: anyone may begin a device grant (the
		// gateway's own, RFC 8628's flow); its device code is the poll's
		// credential.
		{want: "201 201 201 201 201 201 201 201 201 201 201 201", route: "POST " + api.SSODevicePath, req: post(api.SSODevicePath, `{"key_name":"matrix {n}"}`),
			says: `"user_code"`},
		{want: "401 401 401 401 401 401 401 401 401 401 401 401", route: "POST " + api.SSODeviceTokenPath, what: "an unknown device code",
			req: post(api.SSODeviceTokenPath, `{"device_code":"NOSUCHDEVICE"}`)},
		// An organisation's mapping decides who of the provider's people
		// come in, and as what: its administrators read it; only an
		// operator sets it.
		{want: "200 200 404 403 403 404 403 403 403 401 401 401", route: "GET /api/v1/orgs/{org}/sso", req: get("/api/v1/orgs/acme/sso")},
		{want: "200 403 404 403 403 404 403 403 403 401 401 401", route: "PUT /api/v1/orgs/{org}/sso", req: put("/api/v1/orgs/acme/sso", mapping),
			watch: "acme's sign-in mapping"},
		{want: "400 403 404 403 403 404 403 403 403 401 401 401", route: "PUT /api/v1/orgs/{org}/sso", what: "a blank group name",
			req: put("/api/v1/orgs/acme/sso", `{"members":["acme-people"," "],"administrators":[]}`), field: "members", watch: "acme's sign-in mapping"},

		// The audit log.
		{want: "200 200 404 403 403 404 403 403 403 401 401 401", route: "GET /api/v1/audit", req: get("/api/v1/audit?org=acme")},

		// Classes, usage.
		{want: "200 200 404 200 200 404 403 403 403 401 401 401", route: "GET /sandbox/v1/classes", req: get("/sandbox/v1/classes?org=acme")},
		{want: "200 200 404 403 403 404 403 403 403 401 401 401", route: "PUT /sandbox/v1/classes", req: put("/sandbox/v1/classes?org=acme", classFile), watch: "acme's classes"},
		{want: "204 204 404 403 403 404 403 403 403 401 401 401", route: "DELETE /sandbox/v1/classes/{name}", req: del("/sandbox/v1/classes/{new-class}?org=acme")},
		{want: "200 200 404 403 403 404 403 403 403 401 401 401", route: "GET /sandbox/v1/usage", req: get("/sandbox/v1/usage?org=acme")},

		// Sandboxes (SPEC S6): the operator, acme's administrator and the
		// owner see and manage alice's; nobody else finds them.
		{want: "200 200 200 200 200 200 403 403 403 401 401 401", route: "GET /sandbox/v1/sandboxes", req: get("/sandbox/v1/sandboxes?all=true")},
		{want: "201 201 201 201 201 201 403 403 403 401 401 401", route: "POST /sandbox/v1/sandboxes", what: "in the default project",
			req: post("/sandbox/v1/sandboxes", `{"name":"made-{n}","class":"standard","ssh_keys":["{ssh-key}"]}`), watch: "owner's sandboxes"},
		{want: "201 201 400 403 403 403 403 403 403 401 401 401", route: "POST /sandbox/v1/sandboxes", what: "in acme's project ml",
			req: post("/sandbox/v1/sandboxes", `{"name":"made-{n}","class":"standard","project":"ml","ssh_keys":["{ssh-key}"]}`), field: "project"},
		{want: "200 200 404 200 404 404 403 403 403 401 401 401", route: "GET /sandbox/v1/sandboxes/{ref}", req: get("/sandbox/v1/sandboxes/{dev}")},
		{want: "200 200 404 200 404 404 403 403 403 401 401 401", route: "GET /sandbox/v1/sandboxes/{ref}", what: "by name", req: get("/sandbox/v1/sandboxes/dev")},
		{want: "200 200 404 200 404 404 403 403 403 401 401 401", route: "POST /sandbox/v1/sandboxes/{ref}/suspend", req: post("/sandbox/v1/sandboxes/{new-sandbox}/suspend", "")},
		{want: "200 200 404 200 404 404 403 403 403 401 401 401", route: "POST /sandbox/v1/sandboxes/{ref}/resume", req: post("/sandbox/v1/sandboxes/{new-suspended}/resume", "")},
		{want: "200 200 404 200 404 404 403 403 403 401 401 401", route: "POST /sandbox/v1/sandboxes/{ref}/extend", req: post("/sandbox/v1/sandboxes/{dev}/extend", `{"ttl":"1h"}`), watch: "dev's expiry"},
		{want: "200 200 404 200 404 404 403 403 403 401 401 401", route: "POST /sandbox/v1/sandboxes/{ref}/terminate", req: post("/sandbox/v1/sandboxes/{new-sandbox}/terminate", "")},
		// Only the owner and an operator give a task (it acts inside the
		// sandbox); the agent sandbox is no session, so theirs is 409.
		{want: "409 403 404 409 404 404 403 403 403 401 401 401", route: "POST /sandbox/v1/sandboxes/{ref}/tasks", req: post("/sandbox/v1/sandboxes/{agent}/tasks", `{"task":"go on"}`)},
		// Only the owner and an operator fork (a fork holds what ran inside
		// it); only a running sandbox is forked.
		{want: "201 403 404 201 404 404 403 403 403 401 401 401", route: "POST /sandbox/v1/sandboxes/{ref}/fork", req: post("/sandbox/v1/sandboxes/{dev}/fork", `{"name":"fork-{n}"}`),
			watch: "owner's sandboxes"},
		{want: "409 403 404 409 404 404 403 403 403 401 401 401", route: "POST /sandbox/v1/sandboxes/{ref}/fork", what: "a suspended sandbox",
			req: post("/sandbox/v1/sandboxes/{new-suspended}/fork", `{"name":"fork-{n}"}`), watch: "owner's sandboxes"},
		{want: "200 200 404 200 404 404 403 403 403 401 401 401", route: "GET /sandbox/v1/sandboxes/{ref}/run/all", req: get("/sandbox/v1/sandboxes/{agent}/run/all")},
		{want: "200 200 404 200 404 404 403 403 403 401 401 401", route: "GET /sandbox/v1/sandboxes/{ref}/run/log", req: get("/sandbox/v1/sandboxes/{agent}/run/log")},
		{want: "200 200 404 200 404 404 403 403 403 401 401 401", route: "GET /sandbox/v1/sandboxes/{ref}/run/log", what: "run 1 by number", req: get("/sandbox/v1/sandboxes/{agent}/run/log?run=1")},
		{want: "200 200 404 200 404 404 403 403 403 401 401 401", route: "GET /sandbox/v1/sandboxes/{ref}/run/verdict", req: get("/sandbox/v1/sandboxes/{reviewed}/run/verdict")},
		{want: "200 200 404 200 404 404 403 403 403 401 401 401", route: "GET /sandbox/v1/sandboxes/{ref}/run/diff", req: get("/sandbox/v1/sandboxes/{agent}/run/diff")},
		{want: "200 200 404 200 404 404 403 403 403 401 401 401", route: "GET /sandbox/v1/sandboxes/{ref}/egress/hosts", req: get("/sandbox/v1/sandboxes/{agent}/egress/hosts")},
		{want: "200 200 404 200 404 404 403 403 403 401 401 401", route: "GET /sandbox/v1/sandboxes/{ref}/egress/hosts", what: "an engineer's, by name", req: get("/sandbox/v1/sandboxes/dev/egress/hosts")},

		// What a sandbox's own key is for. The credential route allows 10
		// requests a minute from one address: this row's 9 live keys fit.
		{want: "403 403 403 403 403 403 200 409 409 401 401 401", route: "POST /sandbox/v1/git-credential", req: post("/sandbox/v1/git-credential", "")},
		{want: "403 403 403 403 403 403 404 200 200 401 401 401", route: "GET " + api.RunTaskPath, req: get(api.RunTaskPath), watch: "the runs"},
		{want: "403 403 403 403 403 403 404 204 204 401 401 401", route: "POST " + api.RunOutputPath, req: post(api.RunOutputPath, "o {}\n"), watch: "the runs' logs"},
		{want: "403 403 403 403 403 403 404 200 200 401 401 401", route: "POST " + api.RunExitPath, req: post(api.RunExitPath, `{"exit_code":1,"error":"the matrix ends it"}`), watch: "the runs", last: true},
		// The one-time bootstrap token is the credential: no key is one.
		{want: "401 401 401 401 401 401 401 401 401 401 401 401", route: "POST " + api.BootstrapPath, req: post(api.BootstrapPath, "")},

		// git through the gateway: a sandbox's own key, its own repository.
		{want: "404 404 404 404 404 404 200 200 200 401 401 401", route: "GET /git/{path...}", req: get("/git/acme/app.git/info/refs?service=git-upload-pack").in(basic)},
		{want: "404 404 404 404 404 404 404 404 404 401 401 401", route: "GET /git/{path...}", what: "another repository of acme's", req: get("/git/acme/other.git/info/refs?service=git-upload-pack").in(basic)},
		{want: "404 404 404 404 404 404 200 200 200 401 401 401", route: "POST /git/{path...}", req: post("/git/acme/app.git/git-upload-pack", gitPack).in(basic)},
		// The local forge's own endpoint takes only the tokens it minted.
		{want: "401 401 401 401 401 401 401 401 401 401 401 401", route: "GET /forge/{path...}", req: get("/forge/acme/app.git/info/refs?service=git-upload-pack").in(basic)},
		{want: "401 401 401 401 401 401 401 401 401 401 401 401", route: "POST /forge/{path...}", req: post("/forge/acme/app.git/git-upload-pack", gitPack).in(basic)},

		// The tunnel (SPEC S6, S10): an administrator sees the sandbox but
		// may not get inside.
		{want: "101 403 404 101 404 404 403 403 403 401 401 401", route: "GET /sandbox/v1/{ref}/tcp/{port}", req: tunnelTo("/sandbox/v1/{dev}/tcp/2222")},
		{want: "409 403 404 409 404 404 403 403 403 401 401 401", route: "GET /sandbox/v1/{ref}/tcp/{port}", what: "an agent sandbox", req: tunnelTo("/sandbox/v1/{agent}/tcp/2222")},
		// The egress proxy on the gateway's port: only an agent sandbox's
		// own key goes out (here refused: its class names no host, and
		// loopback is never reached by name); every other key is 407.
		{want: "407 407 407 407 407 407 407 403 403 407 407 407", route: "CONNECT host:port", req: request{method: "CONNECT", path: "127.0.0.1:9", place: proxyAuth}, says: "berth egress"},
		{want: "407 407 407 407 407 407 407 403 403 407 407 407", route: "GET http://host/", req: request{method: "GET", path: "http://127.0.0.1:9/", place: proxyAuth}, says: "berth egress"},
		// An HTTP preview of a port (preview.go): the same rule.
		{want: "201 403 404 201 404 404 403 403 403 401 401 401", route: "POST /sandbox/v1/sandboxes/{ref}/previews", req: post("/sandbox/v1/sandboxes/{dev}/previews", `{"port":3000}`)},
		{want: "409 403 404 409 404 404 403 403 403 401 401 401", route: "POST /sandbox/v1/sandboxes/{ref}/previews", what: "an agent sandbox", req: post("/sandbox/v1/sandboxes/{agent}/previews", `{"port":3000}`)},

		// The model routes (SPEC S14), the key where each vendor's clients
		// send theirs.
		{want: "200 200 200 200 200 200 200 200 200 401 401 401", route: "POST /v1/messages", req: post("/v1/messages", anthropic).in(xAPIKey)},
		{want: "200 200 200 200 200 200 200 200 200 401 401 401", route: "POST /v1/messages", what: "Authorization: Bearer", req: post("/v1/messages", anthropic)},
		{want: "200 200 200 200 200 200 200 200 200 401 401 401", route: "POST /v1/messages/count_tokens", req: post("/v1/messages/count_tokens", count).in(xAPIKey)},
		{want: "200 200 200 200 200 200 200 200 200 401 401 401", route: "POST /v1/chat/completions", req: post("/v1/chat/completions", chat)},
		{want: "200 200 200 200 200 200 200 200 200 401 401 401", route: "POST /v1/responses", req: post("/v1/responses", responses)},
		{want: "200 200 200 200 200 200 200 200 200 401 401 401", route: "POST /v1beta/models/{call}", req: post("/v1beta/models/scripted-model:generateContent", gemini).in(googKey)},
		{want: "200 200 200 200 200 200 200 200 200 401 401 401", route: "POST /v1beta/models/{call}", what: "?key=", req: post("/v1beta/models/scripted-model:countTokens", gemini).in(queryKey)},
		{want: "200 200 200 200 200 200 200 200 200 401 401 401", route: "GET /v1/models", req: get("/v1/models")},
		{want: "200 200 200 200 200 200 200 200 200 401 401 401", route: "GET /v1/models", what: "x-api-key", req: get("/v1/models").in(xAPIKey)},
		{want: "200 200 200 200 200 200 200 200 200 401 401 401", route: "GET /api/v1/models", req: get("/api/v1/models")},
		{want: "200 200 404 403 403 404 403 403 403 401 401 401", route: "GET /api/v1/orgs/{org}/inference", req: get("/api/v1/orgs/acme/inference")},
		{want: "200 200 404 403 403 404 403 403 403 401 401 401", route: "PUT /api/v1/orgs/{org}/inference", req: put("/api/v1/orgs/acme/inference", settings), watch: "acme's inference settings"},
		{want: "200 200 404 403 403 404 403 403 403 401 401 401", route: "GET /api/v1/orgs/{org}/projects/{project}/inference", req: get("/api/v1/orgs/acme/projects/default/inference")},
		{want: "200 200 404 403 403 404 403 403 403 401 401 401", route: "PUT /api/v1/orgs/{org}/projects/{project}/inference", req: put("/api/v1/orgs/acme/projects/default/inference", settings),
			watch: "the default project's inference settings"},

		// The web panel, signed in as a browser is: the key in an HttpOnly
		// cookie, every form with its token. A sandbox's key, a revoked key
		// or garbage in the cookie is not signed in. The panel acts in the
		// caller's own organisation.
		//      op  adm xad own mem xmb eng agt rev rvk nil bad
		{want: "200 200 200 200 200 200 200 200 200 200 200 200", route: "GET /assets/{file}", req: page("/assets/panel.css")},
		{want: "200 200 200 200 200 200 200 200 200 200 200 200", route: "GET /sign-in", req: page("/sign-in")},
		{want: "303 303 303 303 303 303 403 403 403 401 401 401", route: "POST /sign-in", req: request{method: "POST", path: "/sign-in", place: signInForm}},
		// Signing in through the identity provider is for anyone: to the
		// provider, for the panel or for berth login --sso; a sign-in the
		// gateway did not start is refused with the sign-in page.
		{want: "303 303 303 303 303 303 303 303 303 303 303 303", route: "GET /sign-in/sso", req: page("/sign-in/sso?next=%2Fquotas"), says: provider},
		{want: "303 303 303 303 303 303 303 303 303 303 303 303", route: "GET /sign-in/sso/cli", req: page("/sign-in/sso/cli?" + cli.Encode()), says: provider},
		{want: "400 400 400 400 400 400 400 400 400 400 400 400", route: "GET /sign-in/sso/cli", what: "a port berth login does not listen on",
			req: page("/sign-in/sso/cli?" + badPort.Encode()), field: "port"},
		{want: "403 403 403 403 403 403 403 403 403 403 403 403", route: "GET /sign-in/sso/callback", what: "a sign-in nobody started",
			req: page("/sign-in/sso/callback?state=NOSUCHSTATE&code=NOSUCHCODE"), says: "This sign-in is unknown, was used already or took too long"},
		// The page where a person types a device grant's code, for anyone;
		// its form is taken only from that page (its own token), so a link
		// an attacker sends cannot approve their device.
		{want: "200 200 200 200 200 200 200 200 200 200 200 200", route: "GET /sign-in/sso/device", req: page("/sign-in/sso/device?code=BCDF-GHJK"), says: "BCDF-GHJK"},
		{want: "403 403 403 403 403 403 403 403 403 403 403 403", route: "POST /sign-in/sso/device", what: "a form not from the device page",
			req: form("/sign-in/sso/device", "code", "BCDF-GHJK"), says: "did not come from this page"},
		// Signing out ends at the sign-in page whoever asks.
		{want: "in  in  in  in  in  in  in  in  in  in  in  in", route: "POST /sign-out", req: form("/sign-out")},
		{want: "303 303 303 303 303 303 in  in  in  in  in  in", route: "GET /{$}", req: page("/")},
		{want: "200 200 200 200 200 200 in  in  in  in  in  in", route: "GET /sandboxes", req: page("/sandboxes?all=1")},
		{want: "200 200 200 200 200 200 in  in  in  in  in  in", route: "GET /sandboxes/new", req: page("/sandboxes/new")},
		{want: "303 303 303 303 303 303 in  in  in  in  in  in", route: "POST /sandboxes/new", req: form("/sandboxes/new", "name", "page-{n}", "purpose", "engineer", "class", "standard", "ssh_keys", "{ssh-key}")},
		{want: "200 200 404 200 404 404 in  in  in  in  in  in", route: "GET /sandboxes/{ref}", req: page("/sandboxes/{dev}")},
		{want: "200 200 404 200 404 404 in  in  in  in  in  in", route: "GET /sandboxes/{ref}/log", req: page("/sandboxes/{agent}/log")},
		// The terminal's WebSocket: the way in's rule, from the panel's own
		// pages only. The world's port 2222 is an echo server, not sshd, so
		// the shell does not open for those let in.
		{want: "409 403 404 409 404 404 in  in  in  in  in  in", route: "GET /sandboxes/{ref}/terminal", req: terminalOf("/sandboxes/{dev}/terminal", "{self}")},
		{want: "403 403 403 403 403 403 in  in  in  in  in  in", route: "GET /sandboxes/{ref}/terminal", what: "from another origin", req: terminalOf("/sandboxes/{dev}/terminal", "https://elsewhere.example")},
		{want: "409 403 404 409 404 404 in  in  in  in  in  in", route: "GET /sandboxes/{ref}/terminal", what: "an agent sandbox", req: terminalOf("/sandboxes/{agent}/terminal", "{self}")},
		{want: "303 303 404 303 404 404 in  in  in  in  in  in", route: "POST /sandboxes/{ref}/{action}", what: "suspend", req: form("/sandboxes/{new-sandbox}/suspend")},
		{want: "303 303 404 303 404 404 in  in  in  in  in  in", route: "POST /sandboxes/{ref}/{action}", what: "resume", req: form("/sandboxes/{new-suspended}/resume")},
		{want: "303 303 404 303 404 404 in  in  in  in  in  in", route: "POST /sandboxes/{ref}/{action}", what: "extend", req: form("/sandboxes/{dev}/extend", "ttl", "1h", "confirm", "1"), watch: "dev's expiry"},
		// Shortening asks first: the page again, nothing changed.
		{want: "200 200 404 200 404 404 in  in  in  in  in  in", route: "POST /sandboxes/{ref}/{action}", what: "extend, shorter", req: form("/sandboxes/{dev}/extend", "ttl", "10m"), watch: "dev's expiry"},
		{want: "303 303 404 303 404 404 in  in  in  in  in  in", route: "POST /sandboxes/{ref}/{action}", what: "terminate", req: form("/sandboxes/{new-sandbox}/terminate")},
		{want: "200 403 404 200 404 404 in  in  in  in  in  in", route: "POST /sandboxes/{ref}/{action}", what: "preview", req: form("/sandboxes/{dev}/preview", "port", "3000")},
		{want: "303 403 404 303 404 404 in  in  in  in  in  in", route: "POST /sandboxes/{ref}/{action}", what: "fork", req: form("/sandboxes/{dev}/fork", "name", "panel-fork-{n}", "count", "1"),
			watch: "owner's sandboxes"},
		{want: "404 404 404 404 404 404 in  in  in  in  in  in", route: "POST /sandboxes/{ref}/{action}", what: "no such action", req: form("/sandboxes/{dev}/explode")},
		{want: "200 200 200 200 200 200 in  in  in  in  in  in", route: "GET /classes", req: page("/classes")},
		{want: "200 200 200 200 200 200 in  in  in  in  in  in", route: "GET /classes/new", req: page("/classes/new")},
		{want: "303 303 303 403 403 403 in  in  in  in  in  in", route: "POST /classes/new", req: form("/classes/new", "name", "page-{n}", "image", "localhost/berth-sandbox:1", "isolation", "standard", "engineer", "on"),
			watch: "acme's classes"},
		{want: "303 303 303 403 403 403 in  in  in  in  in  in", route: "POST /classes/apply", req: form("/classes/apply", "file", classFile), watch: "acme's classes"},
		{want: "200 200 404 200 200 404 in  in  in  in  in  in", route: "GET /classes/{name}/edit", req: page("/classes/acme-only/edit")},
		{want: "303 303 404 403 403 404 in  in  in  in  in  in", route: "POST /classes/{name}/edit", req: form("/classes/acme-only/edit", "description", "edited {n}", "image", "localhost/berth-sandbox:1",
			"isolation", "standard", "engineer", "on"), watch: "acme's classes"},
		// Deleting a class of one's own organisation: sam's has none of that
		// name, but sam may delete none at all.
		{want: "303 303 404 403 403 403 in  in  in  in  in  in", route: "POST /classes/{name}/delete", req: form("/classes/{new-class}/delete")},
		{want: "200 200 200 200 200 200 in  in  in  in  in  in", route: "GET /quotas", req: page("/quotas")},
		{want: "200 200 200 200 200 200 in  in  in  in  in  in", route: "GET /quotas/edit", req: page("/quotas/edit")},
		{want: "200 200 404 200 200 404 in  in  in  in  in  in", route: "GET /quotas/edit", what: "a project's", req: page("/quotas/edit?project=ml")},
		{want: "303 303 303 403 403 403 in  in  in  in  in  in", route: "POST /quotas/edit", req: form("/quotas/edit", "max_sandboxes", "{n}"), watch: "acme's guardrail"},
		{want: "200 200 200 403 403 403 in  in  in  in  in  in", route: "GET /usage", req: page("/usage")},
		// The administrators' screens: a member has none of them (404),
		// but a page of their own keys.
		{want: "200 200 200 404 404 404 in  in  in  in  in  in", route: "GET /audit", req: page("/audit?since=7d")},
		{want: "200 200 200 404 404 404 in  in  in  in  in  in", route: "GET /users", req: page("/users")},
		{want: "200 200 404 200 404 404 in  in  in  in  in  in", route: "GET /users/{user}", what: "the owner's", req: page("/users/{owner}")},
		{want: "200 404 404 404 404 404 in  in  in  in  in  in", route: "GET /users/{user}", what: "the operator's", req: page("/users/{operator}")},
		{want: "200 403 404 200 404 404 in  in  in  in  in  in", route: "POST /users/{user}/keys", what: "for the owner", req: form("/users/{owner}/keys", "name", "panel {n}"),
			watch: "owner's keys"},
		{want: "303 303 404 303 404 404 in  in  in  in  in  in", route: "POST /users/{user}/keys/{id}/revoke", what: "the owner's", req: form("/users/{owner}/keys/{new-owner-key}/revoke")},
		{want: "303 404 404 404 404 404 in  in  in  in  in  in", route: "POST /users/{user}/keys/{id}/revoke", what: "the operator's", req: form("/users/{operator}/keys/{new-operator-key}/revoke")},
		{want: "404 404 404 404 404 404 404 404 404 404 404 404", route: "/", what: "no such page", req: page("/no-such-page")},
	}
}

func get(path string) request        { return request{method: "GET", path: path} }
func del(path string) request        { return request{method: "DELETE", path: path} }
func post(path, body string) request { return request{method: "POST", path: path, body: body} }
func put(path, body string) request  { return request{method: "PUT", path: path, body: body} }

// in sends the request's credential in p instead of as a bearer key.
func (r request) in(p place) request { r.place = p; return r }

// redeem redeems an invitation.
func redeem(invitation string) request {
	return post(api.InvitationRedeemPath, `{"invitation":"`+invitation+`"}`)
}

// tunnelTo is the tunnel's upgrade.
func tunnelTo(path string) request { return request{method: "GET", path: path, tunnel: true} }

// page is a panel page; form a panel form, fields given as name, value….
func page(path string) request { return request{method: "GET", path: path, place: cookie} }

// terminalOf is the panel terminal's WebSocket upgrade, from a page of origin.
func terminalOf(path, origin string) request {
	return request{method: "GET", path: path, place: cookie, origin: origin}
}

func form(path string, fields ...string) request {
	v := url.Values{}
	for i := 0; i+1 < len(fields); i += 2 {
		v.Add(fields[i], fields[i+1])
	}
	return request{method: "POST", path: path, form: v, place: cookie}
}
