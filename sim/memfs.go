package sim

import (
	"fmt"
	"io"
	"io/fs"
	"slices"

	"github.com/flaked/flaked/statefile"
)

// memFS is the fleet's disks: state files by path, in memory, so copying
// a node's state file or restoring an old backup is a slice copy. A lock
// belongs to a process and goes away when it crashes.
type memFS struct {
	files map[string][]byte
	locks map[string]*proc
	// failing makes writes of the path fail (a full or read-only disk).
	failing map[string]bool
}

var _ statefile.FS = (*memFSView)(nil)

func newMemFS() *memFS {
	return &memFS{files: map[string][]byte{}, locks: map[string]*proc{}, failing: map[string]bool{}}
}

// view is the file system as process p sees it.
func (m *memFS) view(p *proc) *memFSView { return &memFSView{m: m, p: p} }

type memFSView struct {
	m *memFS
	p *proc
}

type memLock struct {
	m    *memFS
	path string
	p    *proc
}

func (l memLock) Close() error {
	if l.m.locks[l.path] == l.p {
		delete(l.m.locks, l.path)
	}
	return nil
}

func (v *memFSView) Lock(path string) (io.Closer, error) {
	if h := v.m.locks[path]; h != nil && h != v.p && !h.dead {
		return nil, fmt.Errorf("%w: %s", statefile.ErrLocked, path)
	}
	v.m.locks[path] = v.p
	return memLock{v.m, path, v.p}, nil
}

func (v *memFSView) ReadFile(path string) ([]byte, error) {
	b, ok := v.m.files[path]
	if !ok {
		return nil, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
	}
	return slices.Clone(b), nil
}

func (v *memFSView) WriteFile(path string, data []byte) error {
	if v.p.dead {
		// A process that crashed writes nothing more; the simulator only
		// gets here if the crash happened inside the call.
		return fmt.Errorf("%s: process is gone", path)
	}
	if v.m.failing[path] {
		return fmt.Errorf("%s: no space left on device", path)
	}
	v.m.files[path] = slices.Clone(data)
	return nil
}
