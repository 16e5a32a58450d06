package devcontainer

import (
	"errors"
	"fmt"
)

// Standardize turns JSON with comments (// and /* */) and trailing commas
// into plain JSON, byte for byte otherwise: comments become spaces (a
// newline stays a newline, so encoding/json's offsets still point at the
// right line) and a comma before a closing bracket or brace is dropped.
// What is inside strings is left alone.
func Standardize(in []byte) ([]byte, error) {
	out := make([]byte, 0, len(in))
	// comma is the index in out of a comma that may yet turn out to be
	// trailing, or -1.
	comma := -1
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case c == '"':
			j, err := stringEnd(in, i)
			if err != nil {
				return nil, err
			}
			out = append(out, in[i:j]...)
			i = j - 1
			comma = -1
		case c == '/' && i+1 < len(in) && in[i+1] == '/':
			for i < len(in) && in[i] != '\n' {
				out = append(out, ' ')
				i++
			}
			if i < len(in) {
				out = append(out, '\n')
			}
		case c == '/' && i+1 < len(in) && in[i+1] == '*':
			j := i + 2
			for j+1 < len(in) && !(in[j] == '*' && in[j+1] == '/') {
				j++
			}
			if j+1 >= len(in) {
				return nil, fmt.Errorf("a /* comment at byte %d is not closed", i)
			}
			for k := i; k < j+2; k++ {
				if in[k] == '\n' {
					out = append(out, '\n')
				} else {
					out = append(out, ' ')
				}
			}
			i = j + 1
		case c == ',':
			comma = len(out)
			out = append(out, c)
		case c == ']' || c == '}':
			if comma >= 0 {
				out[comma] = ' '
			}
			comma = -1
			out = append(out, c)
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			out = append(out, c)
		default:
			comma = -1
			out = append(out, c)
		}
	}
	return out, nil
}

// stringEnd is the index just past the JSON string that starts at in[i].
func stringEnd(in []byte, i int) (int, error) {
	for j := i + 1; j < len(in); j++ {
		switch in[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		case '\n':
			return 0, fmt.Errorf("a string at byte %d runs past the end of its line", i)
		}
	}
	return 0, errors.New("a string is not closed")
}
