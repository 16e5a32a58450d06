package transcript

import (
	"fmt"
	"io"
	"strings"
)

// Write writes an event for a person to read, as text:
//
//	the assistant's text, as it is
//	▸ Bash: echo hi > f.txt && git add f.txt
//	  │ c521422 add f.txt
//	  │ … 12 more lines (1.4 KiB) cut
//	✗ error: mock: scripted failure
//	─ 240 in, 34 out, 60 cache read, 10 cache write · 2 turns · $0.0013 · claude-sonnet-4-5
func Write(w io.Writer, e Event) error {
	var b strings.Builder
	switch e.Kind {
	case KindText:
		b.WriteString(e.Text + "\n\n")
	case KindToolCall:
		fmt.Fprintf(&b, "▸ %s", orUnknown(e.Tool))
		if e.Summary != "" {
			b.WriteString(": " + e.Summary)
		}
		b.WriteString("\n")
	case KindToolResult:
		mark := "│"
		if e.Failed {
			mark = "✗"
		}
		if e.Text == "" && e.Cut == 0 {
			fmt.Fprintf(&b, "  %s (no output)\n", mark)
		}
		for l := range strings.Lines(e.Text) {
			fmt.Fprintf(&b, "  %s %s\n", mark, strings.TrimSuffix(l, "\n"))
		}
		if e.Cut > 0 {
			fmt.Fprintf(&b, "  %s … %s cut\n", mark, Cut(e))
		}
		b.WriteString("\n")
	case KindError:
		fmt.Fprintf(&b, "✗ error: %s\n\n", e.Text)
	case KindStderr:
		fmt.Fprintf(&b, "stderr: %s\n", e.Text)
	case KindNote:
		b.WriteString(e.Text + "\n")
	case KindTotals:
		b.WriteString("─ " + Summary(e.Totals) + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Cut says what a trimmed result left out: "3 more lines (1.2 KiB)".
func Cut(e Event) string {
	size := byteSize(e.Cut)
	switch e.CutLines {
	case 0:
		return size
	case 1:
		return "1 more line (" + size + ")"
	}
	return fmt.Sprintf("%d more lines (%s)", e.CutLines, size)
}

// Summary is the totals on one line: tokens, turns, the stream's cost
// when it gives one, the model, the failure.
func Summary(t *Totals) string {
	if t == nil {
		return ""
	}
	u := t.Usage
	parts := []string{fmt.Sprintf("%d in, %d out, %d cache read, %d cache write", u.Input, u.Output, u.CacheRead, u.CacheWrite)}
	if u.Reasoning > 0 {
		parts[0] += fmt.Sprintf(" (%d reasoning)", u.Reasoning)
	}
	if t.Turns == 1 {
		parts = append(parts, "1 turn")
	} else if t.Turns > 1 {
		parts = append(parts, fmt.Sprintf("%d turns", t.Turns))
	}
	if t.CostUSD != nil {
		parts = append(parts, USD(*t.CostUSD))
	} else {
		parts = append(parts, "cost not in the stream")
	}
	if t.Model != "" {
		parts = append(parts, t.Model)
	}
	if t.Error != "" {
		parts = append(parts, "failed")
	}
	if t.Truncated {
		parts = append(parts, "transcript cut short")
	}
	return strings.Join(parts, " · ")
}

// USD writes a cost as the CLI's show does: four decimals, more for a
// fraction of a hundredth of a cent.
func USD(v float64) string {
	if v > 0 && v < 0.0001 {
		return fmt.Sprintf("$%.6f", v)
	}
	return fmt.Sprintf("$%.4f", v)
}

func byteSize(n int) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

func orUnknown(tool string) string {
	if tool == "" {
		return "(a tool)"
	}
	return tool
}
