package coord

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Errors of the state file.
var (
	ErrStateCorrupt  = errors.New("state file is corrupt")
	ErrStateMismatch = errors.New("state file belongs to another fleet")
	ErrStateLocked   = errors.New("state file is in use by another process")
	// ErrStateIO wraps a failure to write the state file (disk full,
	// read-only file system): a fault of the host, not of the input.
	ErrStateIO = errors.New("state file cannot be written")
)

// stateVersion is the format of the state file.
const stateVersion = 1

// State is what a node keeps on local disk so a restart reuses its machine
// IDs and never goes below its reservation.
type State struct {
	Version     int    `json:"version"`
	Namespace   string `json:"namespace"`
	Layout      string `json:"layout"`
	MachineIDs  []int  `json:"machine_ids"`
	Reservation int64  `json:"reservation"` // highest tick this node may have used
	// Token is the owner token of the lease that last wrote the file. A
	// restart presents it to take that lease over (claim.lua), which fences
	// the process holding it, should it still run: the token is never used
	// to renew, so a copy of this file cannot act as its writer.
	Token string `json:"token"`
	// Node names this state file, and every copy of it: made once when the
	// file is created and kept. Two live processes with one node ID run
	// from copies of one file; claim.lua and audit verify report them.
	Node       string    `json:"node,omitempty"`
	Generation string    `json:"generation"` // of the Redis registry it was claimed in
	Released   bool      `json:"released"`   // true after a clean shutdown
	Updated    time.Time `json:"updated"`
	Checksum   string    `json:"checksum"` // CRC-32C of the file with this field empty
}

// StateFile is an open, locked state file. The lock (flock on path.lock,
// which survives the renames that replace the file) is held until Close.
type StateFile struct {
	path string
	node string
	lock *os.File
}

// OpenState locks and reads the state file at path. It returns a nil
// *State when the file does not exist yet. A file that cannot be read,
// fails its checksum, or is not valid is an error wrapping
// ErrStateCorrupt: it is never reused or overwritten silently.
func OpenState(path string) (*StateFile, *State, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrStateIO, path, err)
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		// A read-only file system: the lock still works on a descriptor
		// opened for reading, and the node can go on from Redis while its
		// saves fail (reported). Standalone refuses at the first save.
		var rerr error
		if lock, rerr = os.Open(path + ".lock"); rerr != nil {
			return nil, nil, fmt.Errorf("%w: %s: %w", ErrStateIO, path, err)
		}
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, nil, fmt.Errorf("%w: %s (lock %s.lock: %v); each node needs its own --state-file",
			ErrStateLocked, path, path, err)
	}
	f := &StateFile{path: path, lock: lock, node: newToken()[:16]}
	st, err := readState(path)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if st != nil && st.Node != "" {
		f.node = st.Node
	}
	return f, st, nil
}

func readState(path string) (*State, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrStateCorrupt, path, err)
	}
	var st State
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("%w: %s: %v (move it away only if this node's machine IDs are known to be unused)", ErrStateCorrupt, path, err)
	}
	want := st.Checksum
	st.Checksum = ""
	if got := checksum(&st); got != want {
		return nil, fmt.Errorf("%w: %s: checksum %q, content says %q", ErrStateCorrupt, path, want, got)
	}
	st.Checksum = want
	if st.Version != stateVersion || st.Namespace == "" || st.Layout == "" || len(st.MachineIDs) == 0 || st.Token == "" {
		return nil, fmt.Errorf("%w: %s: missing fields or unknown version %d", ErrStateCorrupt, path, st.Version)
	}
	return &st, nil
}

func checksum(st *State) string {
	b, _ := json.Marshal(st)
	return fmt.Sprintf("%08x", crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

// Path returns the file's path.
func (f *StateFile) Path() string { return f.path }

// Node returns the file's node ID (new when the file is).
func (f *StateFile) Node() string { return f.node }

// Save writes st atomically: a temporary file, fsync, rename over the old
// one, fsync of the directory. When Save returns nil the state survives a
// crash or power loss.
func (f *StateFile) Save(st State) error {
	if err := f.save(st); err != nil {
		return fmt.Errorf("%w: %w", ErrStateIO, err)
	}
	return nil
}

func (f *StateFile) save(st State) error {
	st.Version = stateVersion
	st.Node = f.node
	st.Checksum = ""
	st.Updated = st.Updated.UTC().Truncate(time.Millisecond)
	st.Checksum = checksum(&st)
	data, err := json.MarshalIndent(&st, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	tmp, err := os.CreateTemp(filepath.Dir(f.path), filepath.Base(f.path)+".tmp*")
	if err != nil {
		return fmt.Errorf("state file %s: %w", f.path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("state file %s: %w", f.path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("state file %s: fsync: %w", f.path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("state file %s: %w", f.path, err)
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		return fmt.Errorf("state file %s: %w", f.path, err)
	}
	dir, err := os.Open(filepath.Dir(f.path))
	if err != nil {
		return fmt.Errorf("state file %s: %w", f.path, err)
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("state file %s: fsync dir: %w", f.path, err)
	}
	return nil
}

// Close releases the lock.
func (f *StateFile) Close() error {
	if f == nil || f.lock == nil {
		return nil
	}
	err := f.lock.Close() // closing the descriptor drops the flock
	f.lock = nil
	return err
}

// checkState verifies a state file belongs to this namespace and layout.
func checkState(st *State, path, ns, layout string) error {
	if st.Namespace != ns {
		return fmt.Errorf("%w: %s is for namespace %q, this node runs %q", ErrStateMismatch, path, st.Namespace, ns)
	}
	if st.Layout != layout {
		return fmt.Errorf("%w: %s was written with layout %s, this node runs %s", ErrStateMismatch, path, st.Layout, layout)
	}
	return nil
}
