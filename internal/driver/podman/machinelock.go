package podman

import (
	"sync"

	"berth.dev/berth/internal/sandbox"
)

// machineLocks serialise, per sandbox, what makes its container and
// volume with what removes them. podman deadlocks otherwise (measured
// with an isolated sandbox terminated while it started): a `podman rm`
// that runs before the `podman run` has recorded the container finds
// nothing, and the `podman volume rm --force` after it takes the volume's
// lock and waits for the container's, which the run holds while it waits
// for the volume's; both wait for ever, and the terminate with them.
// Within one gateway a removal now waits for the run to return.
type machineLocks struct {
	mu    sync.Mutex
	locks map[sandbox.ID]*machineLock
}

type machineLock struct {
	sync.Mutex
	users int
}

// lock takes id's lock and returns its release.
func (m *machineLocks) lock(id sandbox.ID) (release func()) {
	m.mu.Lock()
	if m.locks == nil {
		m.locks = map[sandbox.ID]*machineLock{}
	}
	l := m.locks[id]
	if l == nil {
		l = &machineLock{}
		m.locks[id] = l
	}
	l.users++
	m.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		m.mu.Lock()
		if l.users--; l.users == 0 {
			delete(m.locks, id)
		}
		m.mu.Unlock()
	}
}
