package server

import "runtime/debug"

// Commit is the commit berth was built from (the vcs.revision go build
// stamps in a module's checkout), with "+modified" when its tree had
// changes; "" when the build did not record one (go test, go run).
func Commit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return rev + modified
}
