// Package client is the Go client of the gateway's API, used by the CLI and
// by tests. Every non-2xx answer comes back as an *api.Error carrying the
// gateway's code, inside a *fault.Error of the kind the code says, so
// callers branch with errors.Is(err, fault.NotFound) as on the gateway's
// side of the wire, or with errors.As on the *api.Error, not on message
// text.
// Every list method reads the list's pages one after the other (each
// answer's Link rel="next"), so it returns the whole list, or its first n
// entries on a client from WithLimit(n). A call that is safe to repeat is
// sent again after a 503 (see retry.go).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/secret"
	"berth.dev/berth/internal/tunnel"
)

// Client talks to one gateway with one key.
type Client struct {
	base string
	key  secret.Secret
	http *http.Client
	max  int          // the most entries a list method returns; 0: every one
	warn func(string) // nil: none
	// sleep waits before a retry (see retry.go); tests replace it.
	sleep func(ctx context.Context, d time.Duration) error
}

// New returns a Client for the gateway at base (such as
// "http://localhost:8080") authenticating with key ("" for public routes).
func New(base, key string, hc *http.Client) *Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: strings.TrimSuffix(base, "/"), key: secret.New(key), http: hc, sleep: sleep}
}

// WithLimit returns a copy of c whose list methods stop after n entries
// (n <= 0: every entry), asking the gateway for no more than that.
func (c *Client) WithLimit(n int) *Client {
	cp := *c
	cp.max = max(n, 0)
	return &cp
}

// WithWarnings makes c tell warn when the gateway was busy and a call is
// sent again, and returns c.
func (c *Client) WithWarnings(warn func(string)) *Client {
	c.warn = warn
	return c
}

// do sends a request with a JSON body (when in is not nil) and decodes a
// JSON answer into out (when not nil).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	return c.send(ctx, method, path, "application/json", body, out)
}

func (c *Client) send(ctx context.Context, method, path, contentType string, body io.Reader, out any) error {
	resp, err := c.open(ctx, c.http, method, path, contentType, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if next, ok := out.(*nextPage); ok {
		next.cursor = cursorOf(resp.Header.Get("Link"))
		out = next.answer
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// open sends a request through hc and returns a 2xx answer for the caller
// to read and close; any other answer is an *api.Error. A 503 to a call
// safe to repeat is sent again (retry.go).
func (c *Client) open(ctx context.Context, hc *http.Client, method, path, contentType string, body io.Reader, accept string) (*http.Response, error) {
	repeatable := safeToRepeat(method)
	var sent []byte
	if repeatable && body != nil {
		// Kept to be sent again.
		b, err := io.ReadAll(body)
		if err != nil {
			return nil, err
		}
		sent = b
	}
	for retries := 0; ; retries++ {
		if sent != nil {
			body = bytes.NewReader(sent)
		}
		req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
		if err != nil {
			return nil, err
		}
		if body != nil {
			req.Header.Set("Content-Type", contentType)
		}
		req.Header.Set("Accept", accept)
		if !c.key.IsZero() {
			req.Header.Set("Authorization", "Bearer "+c.key.Reveal())
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, err)
		}
		if resp.StatusCode/100 == 2 {
			return resp, nil
		}
		failed := decodeError(resp)
		resp.Body.Close()
		wait, again := retryAfter(ctx, resp, repeatable, retries)
		if !again {
			return nil, failed
		}
		if c.warn != nil {
			c.warn(fmt.Sprintf("the gateway is busy (%s %s); trying again in %v", method, path, wait.Round(100*time.Millisecond)))
		}
		if err := c.sleep(ctx, wait); err != nil {
			return nil, failed
		}
	}
}

// decodeError turns an error answer into an *api.Error, wrapped in the
// *fault.Error of its kind (kinds.go). An answer that is not ours (a
// proxy's HTML page, say) still becomes one, with its status.
func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	e := &api.Error{}
	if err := json.Unmarshal(b, e); err != nil || e.Code == "" {
		e = &api.Error{Code: codeFor(resp.StatusCode), Message: strings.TrimSpace(resp.Status + " " + firstLine(b))}
	}
	e.Status = resp.StatusCode
	return withKind(e, resp.Header)
}

func codeFor(status int) string {
	switch status {
	case http.StatusBadRequest:
		return api.CodeInvalid
	case http.StatusUnauthorized:
		return api.CodeUnauthenticated
	case http.StatusForbidden:
		return api.CodeForbidden
	case http.StatusNotFound:
		return api.CodeNotFound
	case http.StatusConflict:
		return api.CodeConflict
	case http.StatusUpgradeRequired:
		return api.CodeUpgradeRequired
	case http.StatusRequestEntityTooLarge:
		return api.CodeTooLarge
	case http.StatusTooManyRequests:
		return api.CodeRateLimited
	case http.StatusPaymentRequired:
		return api.CodeBudgetExceeded
	case http.StatusBadGateway:
		return api.CodeUpstream
	case http.StatusServiceUnavailable:
		return api.CodeBusy
	}
	return api.CodeInternal
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

func esc(s string) string { return url.PathEscape(s) }

// Health asks /healthz.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var out api.Health
	return out, c.do(ctx, "GET", "/healthz", nil, &out)
}

// Whoami describes the caller.
func (c *Client) Whoami(ctx context.Context) (api.Whoami, error) {
	var out api.Whoami
	return out, c.do(ctx, "GET", "/api/v1/whoami", nil, &out)
}

// Orgs lists the organisations the caller may see, oldest first.
func (c *Client) Orgs(ctx context.Context) ([]api.Organisation, error) {
	return list(ctx, c, "/api/v1/orgs", all[api.Organisation])
}

// CreateOrg creates an organisation (operators).
func (c *Client) CreateOrg(ctx context.Context, req api.CreateOrganisation) (api.Organisation, error) {
	var out api.Organisation
	return out, c.do(ctx, "POST", "/api/v1/orgs", req, &out)
}

// Org returns one organisation by id or name.
func (c *Client) Org(ctx context.Context, ref string) (api.Organisation, error) {
	var out api.Organisation
	return out, c.do(ctx, "GET", "/api/v1/orgs/"+esc(ref), nil, &out)
}

// Projects lists an organisation's projects, oldest (the default) first.
func (c *Client) Projects(ctx context.Context, org string) ([]api.Project, error) {
	return list(ctx, c, "/api/v1/orgs/"+esc(org)+"/projects", all[api.Project])
}

// CreateProject adds a project to an organisation.
func (c *Client) CreateProject(ctx context.Context, org, name string) (api.Project, error) {
	var out api.Project
	return out, c.do(ctx, "POST", "/api/v1/orgs/"+esc(org)+"/projects", api.CreateProject{Name: name}, &out)
}

// Users lists an organisation's users, oldest first.
func (c *Client) Users(ctx context.Context, org string) ([]api.User, error) {
	return list(ctx, c, "/api/v1/orgs/"+esc(org)+"/users", all[api.User])
}

// CreateUser adds a user to an organisation.
func (c *Client) CreateUser(ctx context.Context, org string, req api.CreateUser) (api.User, error) {
	var out api.User
	return out, c.do(ctx, "POST", "/api/v1/orgs/"+esc(org)+"/users", req, &out)
}

// scopePath is the path of what an organisation has (leaf), or one of its
// projects when project is not empty: a guardrail, an agent configuration.
func scopePath(org, project, leaf string) string {
	p := "/api/v1/orgs/" + esc(org)
	if project != "" {
		p += "/projects/" + esc(project)
	}
	return p + "/" + leaf
}

// Guardrail reads the guardrail of an organisation, or of one of its
// projects when project is not empty.
func (c *Client) Guardrail(ctx context.Context, org, project string) (api.Guardrail, error) {
	var out api.Guardrail
	return out, c.do(ctx, "GET", scopePath(org, project, "guardrail"), nil, &out)
}

// SetGuardrail writes a guardrail whole.
func (c *Client) SetGuardrail(ctx context.Context, org, project string, g api.Guardrail) (api.Guardrail, error) {
	var out api.Guardrail
	return out, c.do(ctx, "PUT", scopePath(org, project, "guardrail"), g, &out)
}

// AgentConfig reads an organisation's agent configuration, or a project's.
func (c *Client) AgentConfig(ctx context.Context, org, project string) (api.AgentConfig, error) {
	var out api.AgentConfig
	return out, c.do(ctx, "GET", scopePath(org, project, "agent-config"), nil, &out)
}

// SetAgentConfig writes an organisation's agent configuration whole, or a
// project's.
func (c *Client) SetAgentConfig(ctx context.Context, org, project string, in api.AgentConfig) (api.AgentConfig, error) {
	var out api.AgentConfig
	return out, c.do(ctx, "PUT", scopePath(org, project, "agent-config"), in, &out)
}

// secretsPath is a project's secrets' path.
func secretsPath(org, project string) string {
	return "/api/v1/orgs/" + esc(org) + "/projects/" + esc(project) + "/secrets"
}

// Secrets lists a project's secrets by placeholder, never their values.
func (c *Client) Secrets(ctx context.Context, org, project string) ([]api.SecretInfo, error) {
	var out []api.SecretInfo
	return out, c.do(ctx, "GET", secretsPath(org, project), nil, &out)
}

// SetSecret stores a project's secret (value is sent, never shown back).
func (c *Client) SetSecret(ctx context.Context, org, project, name string, value secret.Secret, hosts []string) (api.SecretInfo, error) {
	var out api.SecretInfo
	return out, c.do(ctx, "PUT", secretsPath(org, project)+"/"+esc(name), api.SecretValue{Value: value.Reveal(), Hosts: hosts}, &out)
}

// DeleteSecret removes a project's secret.
func (c *Client) DeleteSecret(ctx context.Context, org, project, name string) error {
	return c.do(ctx, "DELETE", secretsPath(org, project)+"/"+esc(name), nil, nil)
}

// triggersPath is a project's triggers' path.
func triggersPath(org, project string) string {
	return "/api/v1/orgs/" + esc(org) + "/projects/" + esc(project) + "/triggers"
}

// Triggers lists a project's triggers.
func (c *Client) Triggers(ctx context.Context, org, project string) ([]api.Trigger, error) {
	var out api.TriggerList
	return out.Triggers, c.do(ctx, "GET", triggersPath(org, project), nil, &out)
}

// Trigger reads a project's trigger with its latest deliveries.
func (c *Client) Trigger(ctx context.Context, org, project, name string) (api.Trigger, error) {
	var out api.Trigger
	return out, c.do(ctx, "GET", triggersPath(org, project)+"/"+esc(name), nil, &out)
}

// SetTrigger writes a project's trigger whole.
func (c *Client) SetTrigger(ctx context.Context, org, project, name string, in api.Trigger) (api.Trigger, error) {
	var out api.Trigger
	return out, c.do(ctx, "PUT", triggersPath(org, project)+"/"+esc(name), in, &out)
}

// DeleteTrigger removes a project's trigger.
func (c *Client) DeleteTrigger(ctx context.Context, org, project, name string) error {
	return c.do(ctx, "DELETE", triggersPath(org, project)+"/"+esc(name), nil, nil)
}

// Keys lists a user's keys ("" for the caller's), oldest first.
func (c *Client) Keys(ctx context.Context, user string) ([]api.Key, error) {
	return list(ctx, c, "/api/v1/keys"+query(map[string]string{"user": user}), all[api.Key])
}

// CreateKey mints a key; its secret is in the answer only.
func (c *Client) CreateKey(ctx context.Context, req api.CreateKey) (api.NewKey, error) {
	var out api.NewKey
	return out, c.do(ctx, "POST", "/api/v1/keys", req, &out)
}

// RevokeKey revokes a key at once.
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", "/api/v1/keys/"+esc(id), nil, nil)
}

// Invite issues a one-time invitation for a user of org; its secret is
// in the answer only.
func (c *Client) Invite(ctx context.Context, org, user string, req api.CreateInvitation) (api.Invitation, error) {
	var out api.Invitation
	return out, c.do(ctx, "POST", "/api/v1/orgs/"+esc(org)+"/users/"+esc(user)+"/invitation", req, &out)
}

// Redeem exchanges an invitation for a key of the user it names. It needs
// no key: the invitation is the credential.
func (c *Client) Redeem(ctx context.Context, req api.RedeemInvitation) (api.Enrollment, error) {
	var out api.Enrollment
	return out, c.do(ctx, "POST", api.InvitationRedeemPath, req, &out)
}

// SSO says whether the gateway signs people in through an identity
// provider. It needs no key.
func (c *Client) SSO(ctx context.Context) (api.SSO, error) {
	var out api.SSO
	return out, c.do(ctx, "GET", api.SSOPath, nil, &out)
}

// SSOToken trades berth login --sso's one-time code and its PKCE verifier
// for a key. It needs no key.
func (c *Client) SSOToken(ctx context.Context, req api.SSOToken) (api.Enrollment, error) {
	var out api.Enrollment
	return out, c.do(ctx, "POST", api.SSOTokenPath, req, &out)
}

// StartSSODevice begins berth login --sso --device. It needs no key.
func (c *Client) StartSSODevice(ctx context.Context, req api.StartSSODevice) (api.SSODevice, error) {
	var out api.SSODevice
	return out, c.do(ctx, "POST", api.SSODevicePath, req, &out)
}

// PollSSODevice asks whether somebody has signed in for the device grant:
// an *api.Error with CodePending until then (CodeRateLimited when polled
// too often), then the key. It needs no key.
func (c *Client) PollSSODevice(ctx context.Context, deviceCode string) (api.Enrollment, error) {
	var out api.Enrollment
	return out, c.do(ctx, "POST", api.SSODeviceTokenPath, api.PollSSODevice{DeviceCode: deviceCode}, &out)
}

// SSOMapping reads an organisation's identity-provider mapping.
func (c *Client) SSOMapping(ctx context.Context, org string) (api.SSOMapping, error) {
	var out api.SSOMapping
	return out, c.do(ctx, "GET", "/api/v1/orgs/"+esc(org)+"/sso", nil, &out)
}

// SetSSOMapping replaces an organisation's identity-provider mapping
// (operators).
func (c *Client) SetSSOMapping(ctx context.Context, org string, m api.SSOMapping) (api.SSOMapping, error) {
	var out api.SSOMapping
	return out, c.do(ctx, "PUT", "/api/v1/orgs/"+esc(org)+"/sso", m, &out)
}

func orgQuery(org string) string {
	if org == "" {
		return ""
	}
	return "?org=" + url.QueryEscape(org)
}

// Classes lists an organisation's classes ("" for the caller's) by name.
func (c *Client) Classes(ctx context.Context, org string) ([]api.ClassStatus, error) {
	return list(ctx, c, "/sandbox/v1/classes"+orgQuery(org), all[api.ClassStatus])
}

// ApplyClasses sends a sandboxes file (YAML or JSON) to be applied.
func (c *Client) ApplyClasses(ctx context.Context, org string, file io.Reader) (api.AppliedClasses, error) {
	var out api.AppliedClasses
	return out, c.send(ctx, "PUT", "/sandbox/v1/classes"+orgQuery(org), "application/yaml", file, &out)
}

// DeleteClass removes a class.
func (c *Client) DeleteClass(ctx context.Context, org, name string) error {
	return c.do(ctx, "DELETE", "/sandbox/v1/classes/"+esc(name)+orgQuery(org), nil, nil)
}

// ListOptions narrow Sandboxes.
type ListOptions struct {
	Class   string
	Purpose string
	All     bool
}

// Sandboxes lists the sandboxes the caller may see, newest first.
func (c *Client) Sandboxes(ctx context.Context, o ListOptions) ([]api.Sandbox, error) {
	q := url.Values{}
	if o.Class != "" {
		q.Set("class", o.Class)
	}
	if o.Purpose != "" {
		q.Set("purpose", o.Purpose)
	}
	if o.All {
		q.Set("all", strconv.FormatBool(true))
	}
	path := "/sandbox/v1/sandboxes"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return list(ctx, c, path, func(l *api.SandboxList) []api.Sandbox { return l.Sandboxes })
}

// CreateSandbox asks for a sandbox; it comes back starting.
func (c *Client) CreateSandbox(ctx context.Context, req api.CreateSandbox) (api.Sandbox, error) {
	var out api.Sandbox
	return out, c.do(ctx, "POST", "/sandbox/v1/sandboxes", req, &out)
}

// Sandbox returns one sandbox by id or name.
func (c *Client) Sandbox(ctx context.Context, ref string) (api.Sandbox, error) {
	var out api.Sandbox
	return out, c.do(ctx, "GET", "/sandbox/v1/sandboxes/"+esc(ref), nil, &out)
}

// SandboxEgress says where a sandbox went out to through the gateway's
// egress proxy, and what it was refused.
func (c *Client) SandboxEgress(ctx context.Context, ref string) (api.SandboxEgress, error) {
	var out api.SandboxEgress
	return out, c.do(ctx, "GET", "/sandbox/v1/sandboxes/"+esc(ref)+"/egress/hosts", nil, &out)
}

// RunLog opens the log of an agent sandbox's run as it is now: text, one
// line per line the agent wrote, its standard error's prefixed "stderr: ".
// The caller closes it.
func (c *Client) RunLog(ctx context.Context, ref string) (io.ReadCloser, error) {
	return c.runLog(ctx, c.http, "/sandbox/v1/sandboxes/"+esc(ref)+"/run/log")
}

// FollowRunLog is RunLog whose stream goes on as the run writes until the
// run is over; reading it ends in an error rather than io.EOF when it was
// cut off before that.
func (c *Client) FollowRunLog(ctx context.Context, ref string) (io.ReadCloser, error) {
	// A followed log lasts as long as the run: an overall timeout meant
	// for one call would cut it off.
	untimed := *c.http
	untimed.Timeout = 0
	return c.runLog(ctx, &untimed, "/sandbox/v1/sandboxes/"+esc(ref)+"/run/log?follow=true")
}

// RunDiff is what an agent sandbox's run changed: git's stat and patch of
// its pushed commit against where it started; Commit "" when it pushed
// nothing (yet).
func (c *Client) RunDiff(ctx context.Context, ref string) (RunDiff, error) {
	resp, err := c.open(ctx, c.http, "GET", "/sandbox/v1/sandboxes/"+esc(ref)+"/run/diff", "", nil, "text/plain")
	if err != nil {
		return RunDiff{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return RunDiff{}, err
	}
	return RunDiff{Branch: resp.Header.Get(api.DiffBranchHeader), Commit: resp.Header.Get(api.DiffCommitHeader),
		Diff: string(b), Cut: resp.Header.Get(api.DiffCutHeader) != ""}, nil
}

// RunDiff is a run's change, as RunDiff reads it.
type RunDiff struct {
	Branch, Commit, Diff string
	Cut                  bool
}

func (c *Client) runLog(ctx context.Context, hc *http.Client, path string) (io.ReadCloser, error) {
	resp, err := c.open(ctx, hc, "GET", path, "", nil, "text/plain")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

func (c *Client) act(ctx context.Context, ref, verb string, in any) (api.Sandbox, error) {
	var out api.Sandbox
	return out, c.do(ctx, "POST", "/sandbox/v1/sandboxes/"+esc(ref)+"/"+verb, in, &out)
}

// GiveTask gives a session (an agent sandbox created with Session) its
// next task; it answers the session, starting.
func (c *Client) GiveTask(ctx context.Context, ref, task string) (api.Sandbox, error) {
	return c.act(ctx, ref, "tasks", api.GiveTask{Task: task})
}

// Fork copies a running engineer sandbox (the isolated tier), or a
// session between tasks, into the forks req names, and returns them,
// starting. A POST, so never sent
// again: a second fork would make more sandboxes or find the names taken.
func (c *Client) Fork(ctx context.Context, ref string, req api.Fork) ([]api.Sandbox, error) {
	var out api.SandboxList
	if err := c.do(ctx, "POST", "/sandbox/v1/sandboxes/"+esc(ref)+"/fork", req, &out); err != nil {
		return nil, err
	}
	return out.Sandboxes, nil
}

// Runs lists an agent sandbox's runs, oldest first: a session's tasks.
func (c *Client) Runs(ctx context.Context, ref string) ([]api.Run, error) {
	var out api.Runs
	return out.Runs, c.do(ctx, "GET", "/sandbox/v1/sandboxes/"+esc(ref)+"/run/all", nil, &out)
}

// RunLogOf is RunLog of the sandbox's run seq (a session's task).
func (c *Client) RunLogOf(ctx context.Context, ref string, seq int) (io.ReadCloser, error) {
	return c.runLog(ctx, c.http, "/sandbox/v1/sandboxes/"+esc(ref)+"/run/log?run="+strconv.Itoa(seq))
}

// Suspend stops a running engineer sandbox.
func (c *Client) Suspend(ctx context.Context, ref string) (api.Sandbox, error) {
	return c.act(ctx, ref, "suspend", nil)
}

// Resume starts a suspended or expired engineer sandbox again.
func (c *Client) Resume(ctx context.Context, ref string) (api.Sandbox, error) {
	return c.act(ctx, ref, "resume", nil)
}

// Extend sets a new lifetime from now ("" for the class's default).
func (c *Client) Extend(ctx context.Context, ref, ttl string) (api.Sandbox, error) {
	return c.ExtendWith(ctx, ref, api.Extend{TTL: ttl})
}

// ExtendWith is Extend with every field of the request, such as NoShorten.
func (c *Client) ExtendWith(ctx context.Context, ref string, req api.Extend) (api.Sandbox, error) {
	return c.act(ctx, ref, "extend", req)
}

// Preview asks for an HTTP preview of port of a sandbox: a URL that opens
// it in a browser once, within a minute.
func (c *Client) Preview(ctx context.Context, ref string, port int) (api.Preview, error) {
	var out api.Preview
	err := c.do(ctx, "POST", "/sandbox/v1/sandboxes/"+esc(ref)+"/previews", api.CreatePreview{Port: port}, &out)
	return out, err
}

// Terminate ends a sandbox.
func (c *Client) Terminate(ctx context.Context, ref string) (api.Sandbox, error) {
	return c.act(ctx, ref, "terminate", nil)
}

// DisableUser disables a user: their keys stop working and their sandboxes
// end or expire.
func (c *Client) DisableUser(ctx context.Context, org, user string) (api.DisabledUser, error) {
	var out api.DisabledUser
	return out, c.do(ctx, "POST", "/api/v1/orgs/"+esc(org)+"/users/"+esc(user)+"/disable", nil, &out)
}

// SetUserProject sets the project (a name or id) a user's new sandboxes and
// keys land in; administrators only.
func (c *Client) SetUserProject(ctx context.Context, org, user, project string) (api.User, error) {
	var out api.User
	return out, c.do(ctx, "PUT", "/api/v1/orgs/"+esc(org)+"/users/"+esc(user)+"/project", api.SetUserProject{Project: project}, &out)
}

// EnableUser lets a disabled user back in.
func (c *Client) EnableUser(ctx context.Context, org, user string) (api.User, error) {
	var out api.User
	return out, c.do(ctx, "POST", "/api/v1/orgs/"+esc(org)+"/users/"+esc(user)+"/enable", nil, &out)
}

// UsageOptions narrow a usage report. Empty fields take the gateway's
// defaults (by project, 30d, the caller's organisation).
type UsageOptions struct {
	By    string
	Since string
	Org   string
}

// Usage reads a usage report (administrators and operators): its rows
// from every page, the rest from the first.
func (c *Client) Usage(ctx context.Context, o UsageOptions) (api.UsageReport, error) {
	var out api.UsageReport
	first := true
	rows, err := list(ctx, c, "/sandbox/v1/usage"+query(map[string]string{"by": o.By, "since": o.Since, "org": o.Org}),
		func(r *api.UsageReport) []api.UsageRow {
			if first {
				out, first = *r, false
			}
			return r.Rows
		})
	if err != nil {
		return api.UsageReport{}, err
	}
	out.Rows = rows
	return out, nil
}

// AuditOptions narrow a read of the audit log. Empty fields take the
// gateway's defaults (every sandbox, 24h, the caller's organisation).
type AuditOptions struct {
	Sandbox string
	Since   string
	Org     string
}

// Audit reads the audit log, oldest first (administrators and operators).
func (c *Client) Audit(ctx context.Context, o AuditOptions) ([]api.AuditEvent, error) {
	return list(ctx, c, "/api/v1/audit"+query(map[string]string{"sandbox": o.Sandbox, "since": o.Since, "org": o.Org}),
		func(l *api.AuditLog) []api.AuditEvent { return l.Events })
}

// query encodes the non-empty values as a query string, "" when none is.
func query(kv map[string]string) string {
	q := url.Values{}
	for k, v := range kv {
		if v != "" {
			q.Set(k, v)
		}
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// TunnelPath is the route of the tunnel to port of sandbox ref.
func TunnelPath(ref string, port int) string {
	return "/sandbox/v1/" + esc(ref) + "/tcp/" + strconv.Itoa(port)
}

// Tunnel opens a connection to port of a sandbox through the gateway
// (SPEC S10): the stream carries that TCP connection's bytes until either
// end closes. A refusal is an *api.Error as for every other call (426
// upgrade_required when a proxy stripped the upgrade). An https gateway is
// trusted as this client's HTTP transport trusts it.
func (c *Client) Tunnel(ctx context.Context, ref string, port int) (*tunnel.Conn, error) {
	d := &tunnel.Dialer{}
	if t, ok := c.http.Transport.(*http.Transport); ok && t.TLSClientConfig != nil {
		d.TLSConfig = t.TLSClientConfig
	}
	h := http.Header{}
	if !c.key.IsZero() {
		h.Set("Authorization", "Bearer "+c.key.Reveal())
	}
	conn, err := d.Dial(ctx, c.base+TunnelPath(ref, port), h)
	if re, ok := errors.AsType[*tunnel.RefusedError](err); ok {
		return nil, decodeError(re.Response)
	}
	if err != nil {
		return nil, fmt.Errorf("tunnel to %s: %w", ref, err)
	}
	return conn, nil
}

func inferencePath(org, project string) string {
	if project == "" {
		return "/api/v1/orgs/" + esc(org) + "/inference"
	}
	return "/api/v1/orgs/" + esc(org) + "/projects/" + esc(project) + "/inference"
}

// Inference returns an organisation's (project "") or a project's
// inference settings, with this month's spend (administrators).
func (c *Client) Inference(ctx context.Context, org, project string) (api.InferenceStatus, error) {
	var out api.InferenceStatus
	return out, c.do(ctx, "GET", inferencePath(org, project), nil, &out)
}

// SetInference writes an organisation's (project "") or a project's
// inference settings whole (administrators).
func (c *Client) SetInference(ctx context.Context, org, project string, s api.InferenceSettings) (api.InferenceStatus, error) {
	var out api.InferenceStatus
	return out, c.do(ctx, "PUT", inferencePath(org, project), s, &out)
}

// Models lists the models the caller's key may reach: chat models first,
// routers after, each kind by id.
func (c *Client) Models(ctx context.Context) ([]api.Model, error) {
	return list(ctx, c, "/api/v1/models", func(l *api.ModelList) []api.Model { return l.Models })
}

// nextPage is a list answer being read: the answer's body goes to answer,
// and cursor is set to the next page's cursor, "" on the last page.
type nextPage struct {
	answer any
	cursor string
}

// list reads the list at path (its query holding the list's filters),
// page after page, into entries: each answer is decoded into an A, whose
// entries get returns. It stops at the list's end or after c.max entries.
func list[T, A any](ctx context.Context, c *Client, path string, get func(*A) []T) ([]T, error) {
	out := []T{} // an empty list is [] in JSON, as the gateway sent it
	cursor := ""
	for {
		q := url.Values{}
		if c.max > 0 {
			q.Set("limit", strconv.Itoa(min(c.max-len(out), api.MaxLimit)))
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		p := path
		switch {
		case len(q) > 0 && strings.Contains(path, "?"):
			p += "&" + q.Encode()
		case len(q) > 0:
			p += "?" + q.Encode()
		}
		var a A
		next := &nextPage{answer: &a}
		if err := c.do(ctx, "GET", p, nil, next); err != nil {
			return nil, err
		}
		out = append(out, get(&a)...)
		if next.cursor == "" || (c.max > 0 && len(out) >= c.max) {
			break
		}
		if next.cursor == cursor {
			return nil, fmt.Errorf("GET %s: the gateway gave the same next page twice", path)
		}
		cursor = next.cursor
	}
	if c.max > 0 && len(out) > c.max {
		out = out[:c.max]
	}
	return out, nil
}

// all is the entries of an answer that is a JSON array.
func all[T any](a *[]T) []T { return *a }

// cursorOf is the cursor of the rel="next" target of a Link header (RFC
// 8288), "" when it names none. Only the cursor is taken: the next page is
// the same route, whatever path a proxy in between showed the gateway.
func cursorOf(link string) string {
	for part := range strings.SplitSeq(link, ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
		if !ok || !isNext(params) {
			continue
		}
		u, err := url.Parse(strings.Trim(strings.TrimSpace(target), "<>"))
		if err != nil {
			return ""
		}
		return u.Query().Get("cursor")
	}
	return ""
}

// isNext reports whether a Link's parameters say rel="next" (rel may list
// several relations).
func isNext(params string) bool {
	for p := range strings.SplitSeq(params, ";") {
		name, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if ok && strings.EqualFold(strings.TrimSpace(name), "rel") && slices.Contains(strings.Fields(strings.Trim(strings.TrimSpace(v), `"`)), "next") {
			return true
		}
	}
	return false
}
