// Package statefile is a node's state file: what it keeps on local disk so
// a restart reuses its machine IDs and never issues below its reservation,
// written atomically, checksummed, and locked to one process at a time.
package statefile

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"time"
)

// Errors of the state file.
var (
	ErrCorrupt  = errors.New("state file is corrupt")
	ErrMismatch = errors.New("state file belongs to another fleet")
	ErrLocked   = errors.New("state file is in use by another process")
	// ErrIO wraps a failure to write the state file (disk full,
	// read-only file system): a fault of the host, not of the input.
	ErrIO = errors.New("state file cannot be written")
)

// version is the format of the state file.
const version = 1

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

// File is an open, locked state file. The lock is held until Close.
type File struct {
	fs   FS
	path string
	node string
	lock io.Closer
}

// Open locks and reads the state file at path on the operating system's
// file system: OpenFS(OSFS, path, nil).
func Open(path string) (*File, *State, error) { return OpenFS(OSFS, path, nil) }

// OpenFS locks and reads the state file at path on fs. It returns a
// nil *State when the file does not exist yet; a new file gets a node ID
// from rnd (nil: crypto/rand). A nil fs is OSFS. A file that cannot be read, fails its
// checksum, or is not valid is an error wrapping ErrCorrupt: it is never
// reused or overwritten silently.
func OpenFS(fs FS, path string, rnd io.Reader) (*File, *State, error) {
	if fs == nil {
		fs = OSFS
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	lock, err := fs.Lock(path)
	if err != nil {
		return nil, nil, err
	}
	f := &File{fs: fs, path: path, lock: lock, node: newNodeID(rnd)}
	st, err := read(fs, path)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if st != nil && st.Node != "" {
		f.node = st.Node
	}
	return f, st, nil
}

// newNodeID is 16 hex digits from rnd. It reads 16 bytes, as coord's
// owner tokens do, so a seeded source (the simulator's) draws what it
// always drew for a state file's node ID.
func newNodeID(rnd io.Reader) string {
	b := make([]byte, 16)
	_, _ = io.ReadFull(rnd, b)
	return hex.EncodeToString(b[:8])
}

func read(fs FS, path string) (*State, error) {
	data, err := fs.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
	}
	var st State
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("%w: %s: %v (move it away only if this node's machine IDs are known to be unused)", ErrCorrupt, path, err)
	}
	want := st.Checksum
	st.Checksum = ""
	if got := checksum(&st); got != want {
		return nil, fmt.Errorf("%w: %s: checksum %q, content says %q", ErrCorrupt, path, want, got)
	}
	st.Checksum = want
	if st.Version != version || st.Namespace == "" || st.Layout == "" || len(st.MachineIDs) == 0 || st.Token == "" {
		return nil, fmt.Errorf("%w: %s: missing fields or unknown version %d", ErrCorrupt, path, st.Version)
	}
	return &st, nil
}

func checksum(st *State) string {
	b, _ := json.Marshal(st)
	return fmt.Sprintf("%08x", crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

// Path returns the file's path.
func (f *File) Path() string { return f.path }

// Node returns the file's node ID (new when the file is).
func (f *File) Node() string { return f.node }

// Save writes st atomically: a temporary file, fsync, rename over the old
// one, fsync of the directory. When Save returns nil the state survives a
// crash or power loss.
func (f *File) Save(st State) error {
	if err := f.save(st); err != nil {
		return fmt.Errorf("%w: %w", ErrIO, err)
	}
	return nil
}

func (f *File) save(st State) error {
	st.Version = version
	st.Node = f.node
	st.Checksum = ""
	st.Updated = st.Updated.UTC().Truncate(time.Millisecond)
	st.Checksum = checksum(&st)
	data, err := json.MarshalIndent(&st, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	return f.fs.WriteFile(f.path, data)
}

// Close releases the lock.
func (f *File) Close() error {
	if f == nil || f.lock == nil {
		return nil
	}
	err := f.lock.Close()
	f.lock = nil
	return err
}

// Check verifies that st, read from the file at path, belongs to the
// namespace ns and the layout (its canonical text); an error wrapping
// ErrMismatch otherwise.
func (st *State) Check(path, ns, layout string) error {
	if st.Namespace != ns {
		return fmt.Errorf("%w: %s is for namespace %q, this node runs %q", ErrMismatch, path, st.Namespace, ns)
	}
	if st.Layout != layout {
		return fmt.Errorf("%w: %s was written with layout %s, this node runs %s", ErrMismatch, path, st.Layout, layout)
	}
	return nil
}
