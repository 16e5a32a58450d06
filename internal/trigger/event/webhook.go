package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"berth.dev/berth/internal/fault"
)

// MaxSkew is how far X-Berth-Timestamp may be from the gateway's clock,
// either way.
const MaxSkew = 5 * time.Minute

// Webhook reads a generic webhook delivery, signed as berth's generic
// webhooks are:
//
//	X-Berth-Delivery: <the sender's id for the delivery, 1 to 128 visible ASCII characters>
//	X-Berth-Timestamp: <unix seconds when it was sent>
//	X-Berth-Signature-256: sha256=<hex HMAC-SHA256(secret, timestamp + "." + delivery + "." + body)>
//
// where timestamp and delivery are the X-Berth-Timestamp and
// X-Berth-Delivery headers as sent. A missing or wrong signature, a
// missing or malformed timestamp, one more than MaxSkew from now either
// way (a replay, or a clock astray), or an empty secret is ErrSignature.
// The timestamp bounds how long a captured delivery can be replayed, and
// the delivery id is signed with it: within that window the caller's
// record of Delivery ids stops a replay, which cannot take a new id.
//
// The body must be one JSON object: it becomes Payload (numbers as
// json.Number, string values made valid UTF-8 without control characters
// but \n and \t; a key with control characters is refused). Its top-level
// string fields "title" and "body", if any, become Title and Body, bounded
// as everywhere. A webhook is never ErrIgnored.
func Webhook(h http.Header, body []byte, secret []byte, now time.Time) (Event, error) {
	if err := checkSize(body); err != nil {
		return Event{}, err
	}
	if len(secret) == 0 {
		return Event{}, unauthenticated("no secret is set, so no delivery is taken")
	}
	stamp := h.Get("X-Berth-Timestamp")
	at, ok := unixSeconds(stamp)
	if !ok {
		return Event{}, unauthenticated("X-Berth-Timestamp %.40q is not unix seconds", stamp)
	}
	if err := checkHMAC("X-Berth-Signature-256", h.Get("X-Berth-Signature-256"), secret, []byte(stamp), []byte("."), []byte(h.Get("X-Berth-Delivery")), []byte("."), body); err != nil {
		return Event{}, err
	}
	if skew := now.Sub(at); skew > MaxSkew || skew < -MaxSkew {
		return Event{}, unauthenticated("X-Berth-Timestamp is %s off the gateway's clock, over the %s allowed: a replay, or a sender's clock astray",
			skew.Round(time.Second).Abs(), MaxSkew)
	}
	delivery, err := deliveryID(h, "X-Berth-Delivery")
	if err != nil {
		return Event{}, err
	}
	payload, err := object(body)
	if err != nil {
		return Event{}, err
	}
	e := Event{Source: SourceWebhook, Delivery: delivery, Kind: KindWebhook, Payload: payload}
	if s, ok := payload["title"].(string); ok {
		e.Title = title(s)
	}
	if s, ok := payload["body"].(string); ok {
		e.Body = text(s)
	}
	return e, nil
}

// unixSeconds reads a timestamp of 1 to 12 decimal digits.
func unixSeconds(s string) (time.Time, bool) {
	if s == "" || len(s) > 12 || strings.Trim(s, "0123456789") != "" {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// object decodes body as one JSON object and cleans its strings.
func object(body []byte) (map[string]any, error) {
	if err := checkDepth(body); err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, notJSON(err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, fault.Field("body", "more than one JSON value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fault.Field("body", "not a JSON object")
	}
	if err := cleanValue(m); err != nil {
		return nil, err
	}
	return m, nil
}

// cleanValue makes the strings in an object or array valid UTF-8 without
// control characters but \n and \t, in place; a key with control
// characters is refused (cleaning it could make it another key).
func cleanValue(v any) error {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if clean(k, false) != k {
				return fault.Field("body", "the key %.40q has control characters", k)
			}
			if s, ok := x.(string); ok {
				v[k] = clean(s, true)
			} else if err := cleanValue(x); err != nil {
				return err
			}
		}
	case []any:
		for i, x := range v {
			if s, ok := x.(string); ok {
				v[i] = clean(s, true)
			} else if err := cleanValue(x); err != nil {
				return err
			}
		}
	}
	return nil
}
