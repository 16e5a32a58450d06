package githttp

import (
	"bytes"
	"strings"
	"testing"

	"berth.dev/berth/internal/forge"
)

const (
	zero = "0000000000000000000000000000000000000000"
	a    = "1111111111111111111111111111111111111111"
	b    = "2222222222222222222222222222222222222222"
)

func TestReadCommands(t *testing.T) {
	var in bytes.Buffer
	in.Write(pkt("shallow " + a + "\n"))
	in.Write(pkt(zero + " " + a + " refs/heads/berth/dev\x00report-status side-band-64k agent=git/2.39\n"))
	in.Write(pkt(a + " " + b + " refs/heads/main\n"))
	in.WriteString("0000PACK....")
	c, err := readCommands(&in)
	if err != nil {
		t.Fatal(err)
	}
	want := []forge.RefUpdate{{Old: zero, New: a, Ref: "refs/heads/berth/dev"}, {Old: a, New: b, Ref: "refs/heads/main"}}
	if len(c.updates) != 2 || c.updates[0] != want[0] || c.updates[1] != want[1] {
		t.Fatalf("updates %+v, want %+v", c.updates, want)
	}
	if !c.caps["report-status"] || !c.caps["side-band-64k"] {
		t.Errorf("caps %v", c.caps)
	}
	if rest := in.String(); rest != "PACK...." {
		t.Errorf("read past the flush: %q left", rest)
	}
	if !bytes.HasSuffix(c.raw, []byte("0000")) || !bytes.HasPrefix(c.raw, pkt("shallow "+a+"\n")) {
		t.Errorf("raw %q does not hold exactly what was read", c.raw)
	}
}

func TestReadCommandsRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"empty":        "",
		"no commands":  "0000",
		"bad length":   "zzzz",
		"short":        "0003",
		"truncated":    "0040" + zero,
		"bad command":  string(pkt("hello\n")) + "0000",
		"bad id":       string(pkt("xyz "+a+" refs/heads/x\n")) + "0000",
		"push cert":    string(pkt("push-cert\x00\n")) + "0000",
		"mixed hashes": string(pkt(zero+" "+a+"ab"+strings.Repeat("0", 22)+" refs/heads/x\n")) + "0000",
	} {
		if _, err := readCommands(strings.NewReader(in)); err == nil {
			t.Errorf("%s: readCommands accepted %q", name, in)
		}
	}
}

func TestRefusalSpeaksSideBand(t *testing.T) {
	c := commands{updates: []forge.RefUpdate{{Old: a, New: b, Ref: "refs/heads/main"}}, caps: map[string]bool{"side-band-64k": true}}
	out := refusal(c, map[string]string{"refs/heads/main": "protected"}, "berth refused this push\n")
	r := bytes.NewReader(out)
	var bands [3]bytes.Buffer
	for {
		data, flush, err := readPkt(r)
		if err != nil {
			t.Fatal(err)
		}
		if flush {
			break
		}
		bands[data[0]].Write(data[1:])
	}
	if !strings.Contains(bands[2].String(), "berth refused this push") {
		t.Errorf("band 2 = %q", bands[2].String())
	}
	inner := bytes.NewReader(bands[1].Bytes())
	var lines []string
	for {
		data, flush, err := readPkt(inner)
		if err != nil || flush {
			break
		}
		lines = append(lines, string(data))
	}
	if strings.Join(lines, "") != "unpack ok\nng refs/heads/main protected\n" {
		t.Errorf("report = %q", lines)
	}
}

// FuzzReadCommands: whatever a client sends, the reader never panics and
// never returns an update it did not parse from a well-formed line.
func FuzzReadCommands(f *testing.F) {
	f.Add(string(pkt(zero+" "+a+" refs/heads/x\x00report-status\n")) + "0000PACK")
	f.Add("0000")
	f.Add(string(pkt("shallow "+a+"\n")) + "0000")
	f.Add("ffff")
	f.Fuzz(func(t *testing.T, in string) {
		c, err := readCommands(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, u := range c.updates {
			if !objectID(u.Old) || !objectID(u.New) || u.Ref == "" || strings.ContainsAny(u.Ref, " \x00") {
				t.Fatalf("accepted a malformed update %+v from %q", u, in)
			}
		}
		if !bytes.HasPrefix([]byte(in), c.raw) {
			t.Fatalf("raw is not a prefix of the input")
		}
	})
}
