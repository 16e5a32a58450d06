package panel

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"berth.dev/berth/internal/api"
	"berth.dev/berth/internal/paging"
	"berth.dev/berth/internal/usage"
)

// usagePage is the body of the usage screen.
type usagePage struct {
	By, Since   string
	Bys, Sinces []string
	Report      usage.Report
	AllOrgs     bool // an operator's report over every organisation
	Charts      []chart
	Step        string // hour or day
}

func (p *Panel) usageReport(w http.ResponseWriter, r *http.Request, c caller) {
	q := r.URL.Query()
	body := usagePage{By: q.Get("by"), Since: q.Get("since"),
		Bys: []string{"project", "user", "class"}, Sinces: []string{"1d", "7d", "30d", "90d"}}
	if body.By == "" {
		body.By = string(usage.ByProject)
	}
	if body.Since == "" {
		body.Since = "30d"
	}
	rep, err := p.usage.Report(r.Context(), c.Principal, usage.Query{By: body.By, Since: body.Since, Page: paging.Request{Limit: api.MaxLimit}})
	if err != nil {
		p.fail(w, r, c, err)
		return
	}
	if !slices.Contains(body.Sinces, body.Since) {
		body.Sinces = append(body.Sinces, body.Since)
	}
	body.Report, body.AllOrgs, body.Step = rep, rep.Org == "", stepName(rep.Step)
	core := make([]float64, len(rep.Series))
	cost := make([]float64, len(rep.Series))
	for i, pt := range rep.Series {
		core[i], cost[i] = pt.CoreSeconds, pt.ModelCostUSD
	}
	body.Charts = []chart{
		barChart("core-seconds", "Core-seconds", rep, core, func(v float64) string { return num(v) }),
		barChart("cost", "Model cost (USD)", rep, cost, dollars),
	}
	p.render(w, r, http.StatusOK, "usage", p.view(c, r, "Usage", "usage", body))
}

// chart is a bar chart of a report's series, laid out here and drawn as
// inline SVG by the template: no script, no image to fetch.
type chart struct {
	ID, Title, Desc string
	Width, Height   float64
	Plot            struct{ Left, Top, Right, Bottom float64 }
	Bars            []bar
	YTicks, XTicks  []tick
	Empty           bool
}

type bar struct {
	X, Y, W, H float64
	Label      string // what a pointer or a screen reader is told of it
}

type tick struct {
	X, Y  float64
	Label string
}

// barChart lays out one bar per point of the series.
func barChart(id, title string, rep usage.Report, values []float64, format func(float64) string) chart {
	// A narrow drawing, so its text stays readable scaled down to a phone.
	c := chart{ID: id, Title: title, Width: 480, Height: 200}
	c.Plot.Left, c.Plot.Top, c.Plot.Right, c.Plot.Bottom = 64, 12, 452, 170
	top := niceCeil(slices.Max(append([]float64{0}, values...)))
	c.Empty = top == 0
	if c.Empty {
		top = 1
	}
	layout := "Jan 2"
	if rep.Step < 24*time.Hour {
		layout = "15:04"
	}
	c.Desc = fmt.Sprintf("%s of the sandboxes created in each %s from %s to %s (UTC), by when they were created.",
		title, stepName(rep.Step), when(rep.Since), when(rep.Until))
	h := c.Plot.Bottom - c.Plot.Top
	// The plot starts right of the widest y-axis label, which is drawn
	// anchored at its end: at 14 units a character is at most about 9
	// wide, so "$0.000375" keeps its "$" inside the drawing.
	widest := 0
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		l := format(v)
		widest = max(widest, utf8.RuneCountInString(l))
		c.YTicks = append(c.YTicks, tick{Y: c.Plot.Bottom - h*float64(i)/4, Label: l})
	}
	c.Plot.Left = max(c.Plot.Left, 4+6+9*float64(widest))
	for i := range c.YTicks {
		c.YTicks[i].X = c.Plot.Left - 6
	}
	n := max(len(values), 1)
	slot := (c.Plot.Right - c.Plot.Left) / float64(n)
	every := int(math.Ceil(float64(n) / 6)) // about six labels along the axis
	for i, v := range values {
		x := c.Plot.Left + slot*float64(i)
		bh := h * v / top
		start := rep.Series[i].Start.UTC()
		c.Bars = append(c.Bars, bar{X: x + slot*0.15, Y: c.Plot.Bottom - bh, W: slot * 0.7, H: bh,
			Label: start.Format(layout) + ": " + format(v)})
		if i%every == 0 {
			c.XTicks = append(c.XTicks, tick{X: x + slot/2, Y: c.Plot.Bottom + 20, Label: start.Format(layout)})
		}
	}
	return c
}

// dollars prints an axis's amount without float noise: $0.0375, $12.5.
func dollars(v float64) string {
	return "$" + strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)
}

func stepName(step time.Duration) string {
	if step < 24*time.Hour {
		return "hour"
	}
	return "day"
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten, so the axis
// reads in round numbers.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 0
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}
