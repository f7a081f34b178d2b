package statefile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A state file is never shared or trusted when damaged: a second open
// while one holds the lock is refused naming the holder, and a file that
// is not what Save wrote is refused and left as it is (a node that reused
// it could go below its reservation or take another node's machine IDs).
func TestOpen_LockedOrCorrupt_Refused(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.state")
	sf, _, err := Open(good)
	if err != nil {
		t.Fatal(err)
	}
	st := State{Namespace: "flaked", Layout: "time=39,seq=8,machine=16", MachineIDs: []int{3}, Reservation: 42, Token: "t"}
	if err := sf.Save(st); err != nil {
		t.Fatal(err)
	}
	// A second process cannot open it while it is locked.
	// The error names the file and the holder's PID (here ours: flock
	// locks belong to open files, so a second open in one process is
	// refused too).
	_, _, err = Open(good)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), good) ||
		!strings.Contains(err.Error(), fmt.Sprintf("held by pid %d", os.Getpid())) {
		t.Fatalf("second open: %v, want ErrLocked naming %s and pid %d", err, good, os.Getpid())
	}
	sf.Close()
	data, _ := os.ReadFile(good)
	for _, tc := range []struct {
		name    string
		content string
	}{
		{"garbage", "not json at all"},
		{"truncated", string(data[:len(data)/2])},
		{"empty", ""},
		{"reservation edited", strings.Replace(string(data), `"reservation": 42`, `"reservation": 7`, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".state")
			os.WriteFile(p, []byte(tc.content), 0o644)
			if _, _, err := Open(p); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
			if after, _ := os.ReadFile(p); string(after) != tc.content {
				t.Fatal("a corrupt state file was rewritten")
			}
		})
	}
}

// Check refuses a state file of another namespace or layout, naming both.
func TestCheck_AnotherFleet(t *testing.T) {
	st := &State{Namespace: "flaked", Layout: "a"}
	if err := st.Check("p", "flaked", "a"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ ns, layout, want string }{{"other", "a", `runs "other"`}, {"flaked", "b", "runs b"}} {
		err := st.Check("p", c.ns, c.layout)
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrMismatch naming it", c, err)
		}
	}
}
