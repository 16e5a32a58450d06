package panel

import (
	"berth.dev/berth/internal/transcript"

	"fmt"
	"html/template"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/quantity"
)

// funcs are the templates' helpers: how times, sizes and amounts read.
func (p *Panel) funcs() template.FuncMap {
	return template.FuncMap{
		"asset":    func(name string) string { return p.assets[name] },
		"when":     when,
		"iso":      func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"relative": func(t time.Time) string { return relative(t, p.now()) },
		"now":      p.now,
		"dur":      span,
		"coreSeconds": func(d time.Duration, cpu quantity.Millicores) int64 {
			return int64(d.Seconds() * float64(cpu) / 1000)
		},
		"seconds":    func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) },
		"repos":      repos,
		"ttl":        quantity.FormatDuration,
		"num":        num,
		"usd":        usd,
		"mib":        func(n int64) string { return quantity.Bytes(n << 20).String() },
		"join":       strings.Join,
		"cut":        cut,
		"cutOf":      transcript.Cut,
		"totals":     transcript.Summary,
		"has":        slices.Contains[[]string],
		"title":      capital,
		"dict":       dict,
		"invalid":    invalidAttrs,
		"fieldError": fieldError,
		// vscode lets a vscode:// link the panel built through (html/template
		// refuses schemes it does not know).
		"vscode": func(u string) template.URL {
			if !strings.HasPrefix(u, "vscode://vscode-remote/") {
				return "#"
			}
			return template.URL(u)
		},
	}
}

// problem is what a refused form says: the message, and the field it is
// about when it names one, so the page shows it next to that field.
type problem struct {
	Error, Field string
}

// refuse fills a problem from the answer the API gives for an error: a
// field of a nested document ("sandboxes[0].cpu") is the form's "cpu".
func (pr *problem) refuse(body api.Error) {
	pr.Error, pr.Field = body.Message, body.Field
	if i := strings.LastIndexByte(pr.Field, '.'); i >= 0 {
		pr.Field = pr.Field[i+1:]
	}
}

// refused takes err into pr when it is the input's fault (invalid) and
// returns the status to answer the form with; any other error is the
// error page, answered here, and ok is false.
func (p *Panel) refused(w http.ResponseWriter, r *http.Request, c caller, err error, pr *problem) (status int, ok bool) {
	if fault.Of(err) != fault.Invalid {
		p.fail(w, r, c, err)
		return 0, false
	}
	status, body := p.status(w, r, err)
	pr.refuse(body)
	return status, true
}

// invalidAttrs marks a form's input as the one at fault, pointing at the
// message beside it, when field names it.
func invalidAttrs(field, name string) template.HTMLAttr {
	if field == "" || field != name {
		return ""
	}
	return template.HTMLAttr(`aria-invalid="true" aria-errormessage="` + name + `-error"`)
}

// fieldError is the message beside the input name when field names it.
func fieldError(field, msg, name string) template.HTML {
	if field == "" || field != name || msg == "" {
		return ""
	}
	// Beside the field, the message starts at the field's name: what
	// was being done ("create sandbox dev: ") is the summary's to say.
	if i := strings.Index(msg, name+": "); i > 0 {
		msg = msg[i:]
	}
	return template.HTML(`<p class="field-error" id="` + name + `-error">` + template.HTMLEscapeString(msg) + `</p>`)
}

// capital puts a word's first letter in capitals: "suspend" → "Suspend".
func capital(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// dict makes a map of its arguments, key and value in turn, so a template
// can hand a partial more than one value.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("dict: %d arguments, want pairs", len(kv))
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}

// when is a time as the panel prints it: UTC, to the minute.
func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// relative says how far t is from now: "in 3h 59m", "12m ago".
func relative(t, now time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := t.Sub(now)
	if d >= 0 {
		return "in " + span(d)
	}
	return span(-d) + " ago"
}

// span is a duration to the minute past an hour, to the second below:
// "2d 4h", "3h 05m", "12m 40s", "9s".
func span(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd %dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	case d >= time.Hour:
		return fmt.Sprintf("%dh %02dm", d/time.Hour, d%time.Hour/time.Minute)
	case d >= time.Minute:
		return fmt.Sprintf("%dm %02ds", d/time.Minute, d%time.Minute/time.Second)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

// num groups a whole number's digits by thousands: 1,234,567. It takes
// any integer or float (rounded).
func num(v any) string {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	case float64:
		n = int64(math.Round(x))
	default:
		return fmt.Sprint(v)
	}
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// usd prints US dollars: cents above a dollar, four decimals below (a run
// often costs a fraction of a cent).
func usd(v float64) string {
	if v >= 1 || v == 0 {
		return "$" + strconv.FormatFloat(v, 'f', 2, 64)
	}
	return "$" + strconv.FormatFloat(v, 'f', 4, 64)
}

// cut shortens s to n runes with an ellipsis.
func cut(n int, s string) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
