// Package eventtest makes webhook deliveries as GitHub, GitLab and berth's
// generic webhook senders make them, for tests that hand them to package
// event or replay them at a gateway: payloads in the shapes the forges
// document ("Webhook events and payloads" on docs.github.com, "Webhook
// events" in GitLab's documentation), with the fields berth reads and the
// many it does not, and the headers each sender sets, signed.
//
// Payloads are deterministic: ids, node ids and times derive from the
// arguments, so the same call makes the same bytes (and a redelivery is
// the same body under the same delivery id).
//
// The site arguments are a forge's web address: https://github.com, or a
// GitHub Enterprise or GitLab host such as https://gitlab.example.com:8443.
// A repository's own address (site + "/" + repo) is taken too.
package eventtest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// SignGitHub makes req a GitHub App webhook delivery of event (issues,
// issue_comment, ping…) with id delivery and body: it sets the body and
// the headers GitHub sets (X-GitHub-Event, X-GitHub-Delivery,
// X-GitHub-Hook-ID, X-GitHub-Hook-Installation-Target-Type integration and
// its -ID, X-Hub-Signature with the HMAC-SHA1 and X-Hub-Signature-256 with
// the HMAC-SHA256 of body under secret, User-Agent GitHub-Hookshot/…,
// Content-Type application/json). A redelivery is the same call again.
func SignGitHub(req *http.Request, secret []byte, event, delivery string, body []byte) {
	setBody(req, body)
	h := req.Header
	h.Set("User-Agent", "GitHub-Hookshot/7b4c2e1")
	h.Set("Content-Type", "application/json")
	h.Set("X-GitHub-Event", event)
	h.Set("X-GitHub-Delivery", delivery)
	h.Set("X-GitHub-Hook-ID", "498361275")
	h.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
	h.Set("X-GitHub-Hook-Installation-Target-ID", strconv.Itoa(appID))
	h.Set("X-Hub-Signature", "sha1="+sum(sha1.New, secret, body))
	h.Set("X-Hub-Signature-256", "sha256="+sum(sha256.New, secret, body))
}

// SignGitLab makes req a GitLab webhook delivery of event (Issue Hook,
// Note Hook…) with the secret token token: it sets the headers GitLab sets
// (X-Gitlab-Event, X-Gitlab-Token, X-Gitlab-Webhook-UUID, User-Agent
// GitLab/…, Content-Type application/json) with uuid as both
// X-Gitlab-Event-UUID and Idempotency-Key, so that the event's Delivery is
// uuid on every GitLab version (delete Idempotency-Key to be a GitLab
// older than 17.4). X-Gitlab-Instance is not set: the body, and so the
// instance, is not known here. Set the body apart (or with
// SignGitLabBody).
func SignGitLab(req *http.Request, token, event, uuid string) {
	h := req.Header
	h.Set("User-Agent", "GitLab/18.6.1")
	h.Set("Content-Type", "application/json")
	h.Set("X-Gitlab-Event", event)
	h.Set("X-Gitlab-Webhook-UUID", "0b6d4f7e-3a52-4c1e-9d2f-5e8a7c31b604")
	h.Set("X-Gitlab-Event-UUID", uuid)
	h.Set("Idempotency-Key", uuid)
	if token != "" {
		h.Set("X-Gitlab-Token", token)
	}
}

// SignGitLabBody is SignGitLab that sets the body too.
func SignGitLabBody(req *http.Request, token, event, uuid string, body []byte) {
	setBody(req, body)
	SignGitLab(req, token, event, uuid)
}

// SignWebhook makes req a generic webhook delivery of body sent at at: it
// sets the body, X-Berth-Delivery, X-Berth-Timestamp (unix seconds) and
// X-Berth-Signature-256 (sha256= and the hex HMAC-SHA256 of the timestamp,
// ".", and body under secret), and Content-Type application/json.
func SignWebhook(req *http.Request, secret []byte, delivery string, at time.Time, body []byte) {
	setBody(req, body)
	stamp := strconv.FormatInt(at.Unix(), 10)
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("X-Berth-Delivery", delivery)
	h.Set("X-Berth-Timestamp", stamp)
	h.Set("X-Berth-Signature-256", "sha256="+sum(sha256.New, secret, []byte(stamp+"."+delivery+"."), body))
}

// setBody makes body req's body.
func setBody(req *http.Request, body []byte) {
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	req.ContentLength = int64(len(body))
	if req.Header == nil {
		req.Header = make(http.Header)
	}
}

// sum is the hex HMAC of msg under secret.
func sum(h func() hash.Hash, secret []byte, msg ...[]byte) string {
	mac := hmac.New(h, secret)
	for _, m := range msg {
		mac.Write(m)
	}
	return hex.EncodeToString(mac.Sum(nil))
}

// encode marshals a payload as the forges send it: compact JSON.
func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("eventtest: %v", err)) // our own types always encode
	}
	return b
}

// id derives a stable positive id, below 1e9, from parts.
func id(parts ...any) int64 {
	h := fnv.New64a()
	fmt.Fprint(h, parts...)
	return int64(h.Sum64()%900_000_000) + 100_000_000
}

// site returns the forge's web address from webURL, which may be the
// repository's own address.
func site(webURL, repo string) string {
	webURL = strings.TrimSuffix(webURL, "/")
	return strings.TrimSuffix(webURL, "/"+repo)
}

// The times payloads carry: fixed, so payloads are deterministic.
const (
	created = "2026-03-02T09:14:27Z"
	updated = "2026-03-02T10:41:05Z"
)

// appID is the GitHub App's id the deliveries come from.
const appID = 912407
