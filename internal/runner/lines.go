package runner

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// MaxLine bounds a line of an agent's output; the rest of a longer line
// is dropped. Agents print long lines, but not this long.
const MaxLine = 16 << 20

// ReadLines calls fn for each newline-terminated line of r (without the
// newline), and for a last unterminated one when complete is set. It reads
// r to its end whatever the lines' length, so the writer never blocks, and
// returns what ended the reading (nil at the end of r).
func ReadLines(r io.Reader, complete bool, fn func([]byte)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf) < MaxLine {
			buf = append(buf, chunk[:min(len(chunk), MaxLine-len(buf))]...)
		}
		switch {
		case err == nil:
			fn(bytes.TrimSuffix(buf, []byte("\n")))
			buf = buf[:0]
		case errors.Is(err, bufio.ErrBufferFull):
		default:
			if complete && len(buf) > 0 {
				fn(buf)
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
