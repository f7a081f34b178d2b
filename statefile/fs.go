package statefile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// FS is where state files live: the operating system's file system
// (OSFS), or a simulator's memory (package sim), where copying a node's
// disk or restoring an old backup is a map assignment.
type FS interface {
	// Lock takes the exclusive lock of the state file at path, held until
	// the returned Closer is closed; an error wrapping ErrLocked when
	// another process holds it.
	Lock(path string) (io.Closer, error)
	// ReadFile returns the file's content; an error wrapping
	// fs.ErrNotExist when there is none.
	ReadFile(path string) ([]byte, error)
	// WriteFile replaces the file's content atomically and durably: when
	// it returns nil, the new content survives a crash or power loss.
	WriteFile(path string, data []byte) error
}

// OSFS is the operating system's file system: a flock on path.lock (which
// survives the renames that replace the file), and writes to a temporary
// file, fsynced, renamed over the old one, with the directory fsynced.
var OSFS FS = osFS{}

type osFS struct{}

func (osFS) Lock(path string) (io.Closer, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrIO, path, err)
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		// A read-only file system: the lock still works on a descriptor
		// opened for reading, and the node can go on from Redis while its
		// saves fail (reported). Standalone refuses at the first save.
		var rerr error
		if lock, rerr = os.Open(path + ".lock"); rerr != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrIO, path, err)
		}
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%w: %s (lock %s.lock: %v%s); each node needs its own --state-file",
			ErrLocked, path, path, err, lockHolder(path+".lock"))
	}
	// The holder's PID, for the error of the next process that tries; a
	// lock file that cannot be written (read-only) just names nobody.
	_ = lock.Truncate(0)
	_, _ = lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return lock, nil // closing the descriptor drops the flock
}

// lockHolder names the process that wrote its PID into a held lock file.
func lockHolder(lockPath string) string {
	b, err := os.ReadFile(lockPath)
	if err != nil {
		return ""
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return ""
	}
	return fmt.Sprintf(", held by pid %d", pid)
}

func (osFS) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

func (osFS) WriteFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("state file %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("state file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("state file %s: fsync: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("state file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("state file %s: %w", path, err)
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("state file %s: %w", path, err)
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("state file %s: fsync dir: %w", path, err)
	}
	return nil
}
