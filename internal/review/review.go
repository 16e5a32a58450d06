// Package review digests the verdict of a reviewer run (SPEC S13.5). The
// reviewing agent writes /work/.berth-review-verdict.json; after the run the
// host finds it in the checkout (at the root, or as a recovery fallback the
// first one in a sub-directory), copies it out without trusting anything
// about it, and reads only its own copy. Whatever is not a clear verdict of
// a clean run is held for a human: a review is never approved by default.
//
// The verdict file, as the agent writes it:
//
//	{
//	  "verdict":  "approve" | "request_changes",
//	  "summary":  "one paragraph for the human who reads the outcome",
//	  "comments": [{"path": "main.go", "line": 12, "body": "…"}],
//	  "best":     "try-2"
//	}
//
// verdict is required; summary and comments are optional, and best is
// read only from a reviewer that compares attempts (the name of the one
// it judges best); other fields are ignored. The file must be one JSON object and nothing else.
package review

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// FileName is the verdict's name, at the root of the checkout.
const FileName = ".berth-review-verdict.json"

// MaxSize is the largest verdict file the host copies; a larger one is
// held, not cut.
const MaxSize = 64 << 10

// maxSummary bounds the summary kept on the run's record, and maxBest
// the best attempt's name; the copy keeps all of them.
const (
	maxSummary = 4 << 10
	maxBest    = 256
)

// Outcome is what became of a review.
type Outcome string

// The outcomes of a review.
const (
	// Approved: a clean run whose verdict approves.
	Approved Outcome = "approved"
	// ChangesRequested: a clean run whose verdict asks for changes.
	ChangesRequested Outcome = "changes_requested"
	// Held: anything else, for a human to decide (the reason says why).
	Held Outcome = "held"
)

// Verdict is the file a reviewer writes (see the package comment).
type Verdict struct {
	Verdict  string    `json:"verdict"`
	Summary  string    `json:"summary"`
	Comments []Comment `json:"comments"`
	// Best is, for a reviewer that compares attempts at one task, the
	// name of the one it judges best.
	Best string `json:"best"`
}

// Comment is one remark of a verdict on a place in the change.
type Comment struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Body string `json:"body"`
}

// The verdicts a reviewer may give.
const (
	verdictApprove        = "approve"
	verdictRequestChanges = "request_changes"
)

// Result is what the host records of a review.
type Result struct {
	Outcome Outcome
	// Summary is the verdict's summary, clipped to 4 KiB.
	Summary string
	// SHA256 is the hex digest of the host's copy; "" when nothing was
	// copied.
	SHA256 string
	// Reason says why the review is held; "" when it is not.
	Reason string
	// File is where the verdict was found, relative to the checkout; ""
	// when none was.
	File string
	// Best is the attempt the verdict of a reviewer that compares several
	// names best (Verdict.Best, one of those compared); "" otherwise.
	Best string
}

// Pending is the review of a run that has not finished: held, so a run
// that never gets as far as its verdict stays held for a human.
func Pending() Result {
	return Result{Outcome: Held, Reason: "the run has not finished"}
}

// Hold returns r held for a human, saying why; what was read is kept for
// that human.
func (r Result) Hold(reason string) Result {
	r.Outcome, r.Reason = Held, reason
	return r
}

// Collect finds the verdict in the checkout, copies it to dest (written
// afresh, mode 0600) and digests that copy. A verdict that is missing, a
// symbolic link, not a regular file, larger than MaxSize, not JSON, or
// that gives no known verdict is held, with the reason. Collect trusts
// nothing in the checkout: it follows no symbolic link anywhere in it.
func Collect(checkout, dest string) Result {
	b, rel, err := Fetch(checkout)
	if err != nil {
		return Result{Outcome: Held, Reason: err.Error(), File: rel}
	}
	return Judge(b, rel, dest)
}

// Fetch finds the verdict in the checkout, as Collect does, and reads it:
// what an in-machine run (Kubernetes) sends the gateway, which judges it
// there. The error says why there is none to take; rel is where the
// search stopped, "" when it found nothing.
func Fetch(checkout string) (b []byte, rel string, err error) {
	f, rel, err := find(checkout)
	if err != nil {
		return nil, rel, err
	}
	defer f.Close()
	if b, err = readVerdict(f); err != nil {
		return nil, rel, fmt.Errorf("%s: %v", rel, err)
	}
	return b, rel, nil
}

// Judge writes the host's copy of the verdict b (found at rel) to dest and
// digests that copy.
func Judge(b []byte, rel, dest string) Result {
	r := Result{File: rel}
	if len(b) > MaxSize {
		return r.Hold(fmt.Sprintf("%s: larger than %d KiB", rel, MaxSize>>10))
	}
	if err := writeCopy(b, dest); err != nil {
		return r.Hold(fmt.Sprintf("%s: %v", rel, err))
	}
	// From here on only the host's copy is read.
	b, err := os.ReadFile(dest)
	if err != nil {
		return r.Hold(fmt.Sprintf("read the copy of %s: %v", rel, err))
	}
	sum := sha256.Sum256(b)
	r.SHA256 = hex.EncodeToString(sum[:])
	v, err := Digest(b)
	if err != nil {
		return r.Hold(fmt.Sprintf("%s: %v", rel, err))
	}
	r.Summary, r.Best = clip(v.Summary, maxSummary), clip(v.Best, maxBest)
	switch v.Verdict {
	case verdictApprove:
		r.Outcome = Approved
	case verdictRequestChanges:
		r.Outcome = ChangesRequested
	}
	return r
}

// Digest reads a verdict file. It is an error unless b is one JSON object
// whose verdict is "approve" or "request_changes".
func Digest(b []byte) (Verdict, error) {
	var v Verdict
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&v); err != nil {
		return Verdict{}, fmt.Errorf("not a verdict: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Verdict{}, errors.New("not a verdict: more follows the JSON object")
	}
	switch v.Verdict {
	case verdictApprove, verdictRequestChanges:
		return v, nil
	case "":
		return Verdict{}, errors.New(`no verdict (want "approve" or "request_changes")`)
	}
	return Verdict{}, fmt.Errorf(`unknown verdict %q (want "approve" or "request_changes")`, clip(v.Verdict, 64))
}

// readVerdict reads the open verdict f: a regular file with one link and
// at most MaxSize bytes.
func readVerdict(f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	if links(fi) > 1 {
		return nil, errors.New("a file with several names (a hard link) is not taken")
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxSize {
		return nil, fmt.Errorf("larger than %d KiB", MaxSize>>10)
	}
	return b, nil
}

// writeCopy writes the host's copy of a verdict.
func writeCopy(b []byte, dest string) error {
	out, err := os.OpenFile(dest, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if _, err := out.Write(b); err != nil {
		out.Close()
		return fmt.Errorf("copy: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	return nil
}

// clip cuts s to at most n bytes, dropping a rune the cut would break.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
