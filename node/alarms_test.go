package node_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/internal/poll"
	"github.com/flaked/flaked/node"
)

// Fault: a node's state file is copied while the node runs, and a second
// node starts from the copy (a cloned VM or volume). The copy takes the
// machine ID over, the original is fenced and claims another ID. The alarm
// counts must say so after both nodes look healthy again (the alert rules
// read them), and no ID may be issued twice by the two.
func TestAlarms_StateFileCopiedWhileLive_CountsFence_NoDuplicate(t *testing.T) {
	srv := realRedis(t)
	dir := t.TempDir()
	orig, cp := filepath.Join(dir, "a.state"), filepath.Join(dir, "copy.state")
	opts := func(file string) node.Options {
		return fast(node.Options{Redis: client(t, srv), StateFile: file,
			Registry: coord.Options{LeaseTTL: time.Second, Owner: coord.Owner{Host: filepath.Base(file)}}})
	}
	a := newNode(t, opts(orig))
	ids := issue(t, a, 1000)
	if got := a.Alarms(); got != (node.Alarms{}) {
		t.Fatalf("alarms of a fresh node %+v, want none", got)
	}
	data, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	b := newNode(t, opts(cp))
	if b.MachineIDs()[0] != a.MachineIDs()[0] {
		t.Fatalf("the copy claimed %v, want the original's %v taken over", b.MachineIDs(), a.MachineIDs())
	}
	ids = append(ids, issue(t, b, 1000)...)
	poll.Until(t, 15*time.Second, "the original fenced and on another machine ID", func() bool {
		m := a.MachineIDs()
		return a.Alarms().LeasesFenced == 1 && len(m) == 1 && m[0] != b.MachineIDs()[0] && a.Ready()
	})
	ids = append(ids, issue(t, a, 1000)...)
	ids = append(ids, issue(t, b, 1000)...)
	idtest.Unique(t, a.Layout(), ids)

	if got, want := a.Alarms(), (node.Alarms{LeasesLost: 1, LeasesFenced: 1}); got != want {
		t.Errorf("the original's alarms %+v, want %+v", got, want)
	}
	if got := b.Alarms(); got != (node.Alarms{}) {
		t.Errorf("the copy's alarms %+v, want none (it took the lease over cleanly)", got)
	}
}

// Fault: a node stopped cleanly and two nodes start from copies of its
// state file. The second finds the file's machine ID held by a live
// process with the same node ID, claims another and counts a clone; the
// two issue distinct IDs.
func TestAlarms_StateFileCopiesAfterStop_CountsClone_NoDuplicate(t *testing.T) {
	srv := realRedis(t)
	dir := t.TempDir()
	orig := filepath.Join(dir, "a.state")
	opts := func(file string) node.Options {
		return node.Options{Redis: client(t, srv), StateFile: file, Registry: coord.Options{Owner: coord.Owner{Host: filepath.Base(file)}}}
	}
	initRegistry(t, opts(orig))
	n, err := node.New(ctxT(t), opts(orig))
	if err != nil {
		t.Fatal(err)
	}
	ids := issue(t, n, 1000)
	if err := n.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	var copies []*node.Node
	for _, name := range []string{"c1.state", "c2.state"} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
		c := newNode(t, opts(filepath.Join(dir, name)))
		ids = append(ids, issue(t, c, 1000)...)
		copies = append(copies, c)
	}
	idtest.Unique(t, n.Layout(), ids)
	if got := copies[0].Alarms(); got != (node.Alarms{}) {
		t.Errorf("the first copy's alarms %+v, want none (it took the released ID back)", got)
	}
	if got, want := copies[1].Alarms(), (node.Alarms{Clones: 1}); got != want {
		t.Errorf("the second copy's alarms %+v, want %+v", got, want)
	}
}

// Fault: Redis loses everything (a restart without persistence) while a
// node is stopped; its state file remembers the registry Redis no longer
// has. The claim at the restart notices the loss and the count says so;
// the IDs before and after are distinct.
func TestAlarms_RedisLostRegistry_CountsDataLoss_NoDuplicate(t *testing.T) {
	srv := realRedis(t)
	file := filepath.Join(t.TempDir(), "n.state")
	o := node.Options{Redis: client(t, srv), StateFile: file}
	initRegistry(t, o)
	n, err := node.New(ctxT(t), o)
	if err != nil {
		t.Fatal(err)
	}
	ids := issue(t, n, 1000)
	if err := n.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	srv.Flush(t)
	// node.New, not newNode, which would make a registry: the state file
	// makes the node one that ran under it, so its claim restores it.
	n, err = node.New(ctxT(t), o)
	if err != nil {
		t.Fatalf("a node with a state file of the lost registry: %v", err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	ids = append(ids, issue(t, n, 1000)...)
	idtest.Unique(t, n.Layout(), ids)
	if got, want := n.Alarms(), (node.Alarms{DataLosses: 1}); got != want {
		t.Errorf("alarms after the registry was lost %+v, want %+v", got, want)
	}
}
