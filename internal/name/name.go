// Package name holds the one naming rule berth uses for sandboxes, classes,
// organisations and projects (SPEC S3, S4): lowercase letters, digits and
// interior hyphens, at most 40 characters, because names become hostnames.
package name

import "fmt"

// Max is the longest name allowed.
const Max = 40

// Check returns nil for a valid name, or an error saying what is wrong.
func Check(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("is required")
	case len(s) > Max:
		return fmt.Errorf("%q is longer than %d characters", s, Max)
	}
	for i, c := range s {
		ok := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (c == '-' && i > 0 && i < len(s)-1)
		if !ok {
			return fmt.Errorf("%q must be lowercase letters, digits and interior hyphens (it becomes a hostname)", s)
		}
	}
	return nil
}
