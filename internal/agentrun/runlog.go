package agentrun

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"

	"berth.dev/berth/internal/fault"
	"berth.dev/berth/internal/sandbox"
)

// RunLogs keeps runs' logs (SPEC S13.4: every line of a run's output): a
// file a run in the gateway's data directory on one host, the database when
// replicas share it, so any replica answers for a run another one read.
type RunLogs interface {
	// Write starts id's log anew: a run's output read again (after a
	// restart, or streamed again by its machine) is read from its first
	// line.
	Write(ctx context.Context, id sandbox.ID) (io.WriteCloser, error)
	// Read reads id's log from its start. At its end Read returns io.EOF,
	// and a later Read what was written since, so a follower reads on.
	// fault.NotFound when id has none.
	Read(ctx context.Context, id sandbox.ID) (io.ReadCloser, error)
	// Remove deletes id's log and the logs of its session's later runs
	// (id, a dot and the run's number); none is not an error.
	Remove(ctx context.Context, id sandbox.ID) error
}

// FileLogs keeps each run's log in a file of its own in a directory.
type FileLogs struct{ Dir string }

func (l FileLogs) path(id sandbox.ID) string { return filepath.Join(l.Dir, string(id)+".log") }

// Write truncates and opens id's file.
func (l FileLogs) Write(_ context.Context, id sandbox.ID) (io.WriteCloser, error) {
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return nil, err
	}
	return os.OpenFile(l.path(id), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
}

// Read opens id's file.
func (l FileLogs) Read(_ context.Context, id sandbox.ID) (io.ReadCloser, error) {
	f, err := os.Open(l.path(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fault.Errorf(fault.NotFound, "run log of %s", id)
	}
	return f, err
}

// Remove deletes id's file and its session's later runs'.
func (l FileLogs) Remove(_ context.Context, id sandbox.ID) error {
	later, err := filepath.Glob(filepath.Join(l.Dir, string(id)+".*.log"))
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range append(later, l.path(id)) {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// logs is the deployment's run logs: the configured ones, else files in
// the agents' log directory.
func (s *Service) logs() RunLogs {
	if s.cfg.Logs != nil {
		return s.cfg.Logs
	}
	return FileLogs{Dir: s.cfg.LogDir}
}
