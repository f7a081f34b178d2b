package tests

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flaked/flaked/internal/poll"
)

// smallDisk mounts a tmpfs of size bytes for the test (root only: a test
// of a full or read-only disk needs a real file system that is full or
// read-only; root ignores file modes). It is unmounted at the end.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root and mount permission): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

func remount(t *testing.T, dir, mode string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,"+mode, dir).CombinedOutput(); err != nil {
		t.Fatalf("remount %s %s: %v %s", dir, mode, err, out)
	}
}

// fill writes to dir until the disk is full, and returns the file.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "fill")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return path
		}
	}
}

func infoField(t *testing.T, d *Daemon, field string) string {
	t.Helper()
	info, err := d.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return info[field]
}

// 14. The state file's disk full while the node runs with Redis, then
// read-only at a restart: it goes on issuing from Redis's reservations
// (the state file is a second copy of them) and reports the failure; a
// state file that cannot be created at all is a
// runtime failure (exit 1), not bad flags (2). Standalone, the state file
// is the only record, so the node stops issuing past its reservation while
// the disk is full, and goes on once it is not.
func TestStateFile_DiskFullOrReadOnly(t *testing.T) {
	disk := smallDisk(t, "256k")
	srv := redisServer(t, false)
	d := NewDaemon(t, "disk", srv.URL())
	d.StateFile = filepath.Join(disk, "disk.state")
	d.InitRegistry()
	d.MustStart()
	d.WaitReady(t, 30*time.Second)
	load := StartLoad([]*Daemon{d}, connsPerDaemon, batch)
	load.WaitFor(t, int64(scale(20_000)), time.Minute, "warm-up")

	full := fill(t, disk)
	time.Sleep(4 * time.Second) // past the reservation granted before
	load.WaitFor(t, int64(scale(20_000)), time.Minute, "with the disk full")
	if e := infoField(t, d, "state_file_error"); !strings.Contains(e, "no space") {
		t.Errorf("INFO state_file_error with the disk full = %q", e)
	}
	if !d.Ready() || !strings.Contains(d.Log(), "state file cannot be written") {
		t.Errorf("with the disk full: ready %v, log:\n%s", d.Ready(), d.Log())
	}
	if err := os.Remove(full); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "state_file_error clears once the disk has room", func() bool {
		return infoField(t, d, "state_file_error") == ""
	})

	// A file system goes read-only under a running process only by the
	// kernel's hand (errors=remount-ro); a remount by hand is refused while
	// the node holds its lock file open for writing. So: stopped, made
	// read-only, restarted.
	d.Kill()
	remount(t, disk, "ro")
	d.MustStart() // the lock opens for reading; saves fail and are reported
	d.WaitReady(t, 30*time.Second)
	time.Sleep(4 * time.Second) // past the reservation of the claim
	load.WaitFor(t, int64(scale(20_000)), time.Minute, "restarted on the read-only disk")
	if e := infoField(t, d, "state_file_error"); !strings.Contains(e, "read-only") {
		t.Errorf("INFO state_file_error on a read-only disk = %q", e)
	}

	fresh := NewDaemon(t, "fresh", srv.URL())
	fresh.StateFile = filepath.Join(disk, "sub", "fresh.state")
	err := fresh.Start()
	if code := exitCode(errors.Unwrap(err)); err == nil || !strings.Contains(err.Error(), "exit status 1") {
		t.Errorf("a state file that cannot be created: %v (status %d), want exit status 1", err, code)
	}
	d.Kill()
	remount(t, disk, "rw")

	// Standalone.
	s := NewDaemon(t, "standalone", "")
	s.Args = nil
	s.StateFile = filepath.Join(disk, "standalone.state")
	s.MustStart()
	s.WaitReady(t, 30*time.Second)
	sl := StartLoad([]*Daemon{s}, connsPerDaemon, batch)
	sl.WaitFor(t, int64(scale(10_000)), time.Minute, "standalone warm-up")
	full = fill(t, disk)
	poll.Until(t, 15*time.Second, "standalone stops issuing while its state file cannot be written", func() bool {
		return !s.Ready()
	})
	before := sl.errs.Load()
	time.Sleep(3 * time.Second) // past --id-wait (900 ms): a request the node cannot serve fails then
	if sl.errs.Load() == before {
		t.Error("standalone with a full disk: no request failed; it issued past what its state file records")
	}
	if err := os.Remove(full); err != nil {
		t.Fatal(err)
	}
	s.WaitReady(t, 15*time.Second)
	sl.WaitFor(t, int64(scale(10_000)), time.Minute, "standalone after the disk has room")
	load.Absorb(sl)
	load.Stop()
	load.Check(t, defaultLayout())
}
