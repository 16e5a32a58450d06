package schedule

import (
	"strconv"
	"strings"
)

// maxItems is the most list items a field may have.
const maxItems = 100

// field describes one of the five fields of a schedule.
type field struct {
	name     string // as errors name it
	min, max int    // what a number may be
	last     int    // where * and a/n stop: max, except 6 for the day of the week
	names    []string
	nameHint string // how errors describe names, "" when there are none
}

// fieldSpecs returns the five fields in the order a schedule writes them.
func fieldSpecs() [5]field {
	return [5]field{
		{name: "minute", min: 0, max: 59, last: 59},
		{name: "hour", min: 0, max: 23, last: 23},
		{name: "day-of-month", min: 1, max: 31, last: 31},
		{name: "month", min: 1, max: 12, last: 12,
			names:    []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"},
			nameHint: " or a month name (jan-dec)"},
		// 7 is Sunday as well as 0; parse folds it onto 0. * stops at
		// Saturday so that */2 or 1/2 does not add Sunday twice over.
		{name: "day-of-week", min: 0, max: 7, last: 6,
			names:    []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"},
			nameHint: " or a day name (sun-sat)"},
	}
}

// span is how many values the field has, the largest step it allows.
func (f field) span() int { return f.last - f.min + 1 }

// parse reads one field into a set whose bit v is on when value v matches.
func (f field) parse(text string) (uint64, error) {
	if n := strings.Count(text, ",") + 1; n > maxItems {
		return 0, failf("%s: %d list items, over the limit of %d", f.name, n, maxItems)
	}
	var set uint64
	for item := range strings.SplitSeq(text, ",") {
		bits, err := f.parseItem(item, text)
		if err != nil {
			return 0, err
		}
		set |= bits
	}
	if f.max == 7 && set&(1<<7) != 0 {
		set = set&^(1<<7) | 1
	}
	return set, nil
}

// parseItem reads one list item: *, a, a-b, each with an optional /step.
func (f field) parseItem(item, text string) (uint64, error) {
	if item == "" {
		return 0, failf("%s: %q has an empty list item", f.name, text)
	}
	rng, stepText, hasStep := strings.Cut(item, "/")
	var lo, hi int
	var err error
	switch {
	case rng == "*":
		lo, hi = f.min, f.last
	case strings.Contains(rng, "-"):
		a, b, _ := strings.Cut(rng, "-")
		if lo, err = f.value(a, item); err != nil {
			return 0, err
		}
		if hi, err = f.value(b, item); err != nil {
			return 0, err
		}
		if lo > hi {
			return 0, failf("%s: range %s runs backwards: write the smaller value first", f.name, rng)
		}
	default:
		if lo, err = f.value(rng, item); err != nil {
			return 0, err
		}
		hi = lo
		if hasStep {
			hi = max(f.last, lo)
		}
	}
	step := 1
	if hasStep {
		if step, err = f.step(stepText, item); err != nil {
			return 0, err
		}
	}
	var set uint64
	for v := lo; v <= hi; v += step {
		set |= 1 << v
	}
	return set, nil
}

// value reads a number or a name within item.
func (f field) value(text, item string) (int, error) {
	if text == "" {
		return 0, failf("%s: %q is missing a number", f.name, item)
	}
	if digits(text) {
		n, ok := small(text)
		if !ok || n < f.min || n > f.max {
			return 0, failf("%s: %s is out of range %d-%d", f.name, text, f.min, f.max)
		}
		return n, nil
	}
	for i, name := range f.names {
		if strings.EqualFold(text, name) {
			return f.min + i, nil
		}
	}
	return 0, failf("%s: %q is not a number (%d-%d)%s", f.name, text, f.min, f.max, f.nameHint)
}

// step reads the step after the / of item.
func (f field) step(text, item string) (int, error) {
	switch {
	case text == "":
		return 0, failf("%s: %q is missing a step after /", f.name, item)
	case strings.Contains(text, "/"):
		return 0, failf("%s: %q has more than one /", f.name, item)
	case !digits(text):
		return 0, failf("%s: step %q is not a number (1-%d)", f.name, text, f.span())
	}
	n, ok := small(text)
	if !ok || n < 1 || n > f.span() {
		return 0, failf("%s: step %s is out of range 1-%d", f.name, text, f.span())
	}
	return n, nil
}

// digits says whether s is ASCII digits only: no sign, no space.
func digits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// small reads a string of digits that is at most four digits long once
// its leading zeros are gone; longer is out of every field's range.
func small(s string) (int, bool) {
	s = strings.TrimLeft(s, "0")
	if s == "" {
		return 0, true
	}
	if len(s) > 4 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}
