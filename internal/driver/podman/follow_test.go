package podman_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"berth.dev/berth/internal/driver/podman"
)

// fakePodman is a podman binary for Follow: logs --follow prints part of
// the log, a line cut in half last, and then never ends, complaining as
// podman does with events off unless only fatal errors are asked for;
// wait polls a while and reports the exit; a plain logs prints the whole
// log.
const fakePodman = `#!/bin/sh
quiet=
if [ "$1" = "--log-level=fatal" ]; then quiet=1; shift; fi
case "$1" in
logs)
	if [ "$2" = "--follow" ]; then
		echo one; echo two >&2; printf 'thr'
		[ -n "$quiet" ] || echo 'time="2026-11-30T06:50:19Z" level=error msg="Waiting for container to exit: cannot read events with the \"none\" backend"' >&2
		exec sleep 60
	fi
	echo one; echo two >&2; echo three; echo four >&2; printf 'five'
	;;
wait)
	sleep 0.3; echo 0
	;;
*)
	echo "unexpected podman $*" >&2; exit 125
	;;
esac
`

// TestFollowEndsWhenTheContainerDoes: Follow returns once podman wait
// does, with every line once, in its stream, and the half line whole.
func TestFollowEndsWhenTheContainerDoes(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "podman")
	if err := os.WriteFile(bin, []byte(fakePodman), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := podman.New(podman.Config{Binary: bin, StateDir: t.TempDir()}, slog.New(slog.NewTextHandler(t.Output(), nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	var stdout, stderr []string
	err = d.Follow(t.Context(), "sbx_1", func(out bool, b []byte) {
		if out {
			stdout = append(stdout, string(b))
		} else {
			stderr = append(stderr, string(b))
		}
	})
	if err != nil {
		t.Fatalf("Follow: %v", err)
	}
	if want := []string{"one", "three", "five"}; !slices.Equal(stdout, want) {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	if want := []string{"two", "four"}; !slices.Equal(stderr, want) {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
}
