package githttp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"berth.dev/berth/internal/forge"
)

// maxPkt is the largest pkt-line git sends (65520 bytes with its header).
const maxPkt = 65520

// maxCommands bounds one push's ref updates.
const maxCommands = 1000

// errProtocol is a request that is not the git protocol we expect.
var errProtocol = errors.New("not a git receive-pack request")

// readPkt reads one pkt-line. flush is true for "0000"; data excludes the
// four-byte length.
func readPkt(r io.Reader) (data []byte, flush bool, err error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, false, fmt.Errorf("pkt-line header: %w", errProtocol)
	}
	n, err := strconv.ParseUint(string(hdr[:]), 16, 16)
	if err != nil {
		return nil, false, fmt.Errorf("pkt-line length %q: %w", hdr, errProtocol)
	}
	switch {
	case n == 0:
		return nil, true, nil
	case n < 4 || n > maxPkt:
		return nil, false, fmt.Errorf("pkt-line length %d: %w", n, errProtocol)
	}
	data = make([]byte, n-4)
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, false, fmt.Errorf("pkt-line body: %w", errProtocol)
	}
	return data, false, nil
}

// pkt encodes one pkt-line.
func pkt(s string) []byte { return fmt.Appendf(nil, "%04x%s", len(s)+4, s) }

// commands is the start of a receive-pack request: the ref updates, the
// client's capabilities, and the bytes read, to hand on unchanged.
type commands struct {
	updates []forge.RefUpdate
	caps    map[string]bool
	raw     []byte
}

// readCommands reads the command list of a receive-pack request, up to and
// including its flush-pkt: "<old> <new> <ref>" lines, the first carrying
// the capabilities after a NUL, maybe preceded by "shallow <id>" lines.
func readCommands(r io.Reader) (commands, error) {
	var raw bytes.Buffer
	c := commands{caps: map[string]bool{}}
	tee := io.TeeReader(r, &raw)
	for {
		data, flush, err := readPkt(tee)
		if err != nil {
			return c, err
		}
		if flush {
			break
		}
		line := strings.TrimSuffix(string(data), "\n")
		if rest, ok := strings.CutPrefix(line, "shallow "); ok {
			if !objectID(rest) {
				return c, fmt.Errorf("shallow line: %w", errProtocol)
			}
			continue
		}
		if strings.HasPrefix(line, "push-cert") {
			return c, fmt.Errorf("signed pushes are not supported: %w", errProtocol)
		}
		if len(c.updates) == 0 {
			var caps string
			line, caps, _ = strings.Cut(line, "\x00")
			for _, cp := range strings.Fields(caps) {
				c.caps[cp] = true
			}
		}
		f := strings.Fields(line)
		if len(f) != 3 || !objectID(f[0]) || !objectID(f[1]) || len(f[0]) != len(f[1]) {
			return c, fmt.Errorf("command %q: %w", line, errProtocol)
		}
		c.updates = append(c.updates, forge.RefUpdate{Old: f[0], New: f[1], Ref: f[2]})
		if len(c.updates) > maxCommands {
			return c, fmt.Errorf("more than %d ref updates: %w", maxCommands, errProtocol)
		}
	}
	if len(c.updates) == 0 {
		return c, fmt.Errorf("no ref updates: %w", errProtocol)
	}
	c.raw = raw.Bytes()
	return c, nil
}

// objectID accepts a SHA-1 or SHA-256 object name in hex.
func objectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// refusal is receive-pack's answer refusing every update: git prints each
// as "! [remote rejected] <ref> (<reason>)", and, with side-band, shows
// the message as "remote: …".
func refusal(c commands, refused map[string]string, message string) []byte {
	var report bytes.Buffer
	report.Write(pkt("unpack ok\n"))
	for _, u := range c.updates {
		why, ok := refused[u.Ref]
		if !ok {
			why = "not pushed: another ref of this push was refused"
		}
		report.Write(pkt("ng " + u.Ref + " " + oneLine(why) + "\n"))
	}
	report.WriteString("0000")
	if !c.caps["side-band-64k"] && !c.caps["side-band"] {
		return report.Bytes()
	}
	var out bytes.Buffer
	for line := range strings.Lines(message) {
		out.Write(pkt("\x02" + line))
	}
	body := report.Bytes()
	for len(body) > 0 {
		n := min(len(body), 900)
		out.Write(pkt("\x01" + string(body[:n])))
		body = body[n:]
	}
	out.WriteString("0000")
	return out.Bytes()
}

func oneLine(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }
