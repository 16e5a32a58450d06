package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// outputFlag adds -o/--output to a command. The format is checked as the
// flag is parsed, so a command that changes something (create, bootstrap)
// never does it and then refuses to print the result.
func outputFlag(cmd *cobra.Command, dst *string) {
	*dst = "table"
	cmd.Flags().VarP((*formatValue)(dst), "output", "o", "output format: table or json")
}

// orgFlag adds --org to commands on one organisation (see inOrg).
func orgFlag(dst *string, cmds ...*cobra.Command) {
	for _, c := range cmds {
		c.Flags().StringVar(dst, "org", "", "organisation name or id (default yours)")
	}
}

// limitFlag adds --limit to a list command. Without it the command shows
// the whole list, which the client reads from the gateway a page at a time.
func limitFlag(cmd *cobra.Command, dst *int) {
	cmd.Flags().IntVar(dst, "limit", 0, "show the first N only (default every one; the gateway is asked a page at a time)")
}

// formatValue is the value of -o: table or json.
type formatValue string

func (f *formatValue) Set(s string) error {
	if s != "table" && s != "json" {
		return errors.New("want table or json")
	}
	*f = formatValue(s)
	return nil
}

func (f *formatValue) String() string { return string(*f) }
func (f *formatValue) Type() string   { return "format" }

// render prints v as indented JSON for -o json, or through table otherwise.
func render(w io.Writer, format string, v any, table func(tw *tabwriter.Writer)) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "table", "":
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		table(tw)
		return tw.Flush()
	}
	return usageError{fmt.Errorf("--output %q: want table or json", format)}
}

// until words the time from now to t for a table, at minute precision.
func until(now, t time.Time) string {
	d := t.Sub(now).Round(time.Minute)
	switch {
	case d > 0:
		return "in " + short(d)
	case d < 0:
		return short(-d) + " ago"
	}
	return "now"
}

// short prints a duration without zero units: "3h5m", "2d4h", "45s".
func short(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	h := d / time.Hour
	d -= h * time.Hour
	m := d / time.Minute
	out := ""
	if days > 0 {
		out += fmt.Sprintf("%dd", days)
	}
	if h > 0 {
		out += fmt.Sprintf("%dh", h)
	}
	if m > 0 && days == 0 {
		out += fmt.Sprintf("%dm", m)
	}
	if out == "" {
		out = "0m"
	}
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// list splits a comma-separated flag value, dropping empty entries.
func list(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
