package coord_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	sonyflakev1 "github.com/sony/sonyflake"
	"github.com/sony/sonyflake/v2"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/redisurl"
)

// TestSonyflakeChild is the body of the child processes of
// TestSonyflakeAdapters_TwoProcesses_NoDuplicates; alone it does nothing.
func TestSonyflakeChild(t *testing.T) {
	url, out := os.Getenv("FLAKED_SF_URL"), os.Getenv("FLAKED_SF_OUT")
	if url == "" {
		t.Skip("runs only as a child process")
	}
	n, _ := strconv.Atoi(os.Getenv("FLAKED_SF_N"))
	rdb, err := redisurl.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	reg, err := coord.NewRegistry(rdb, coord.Options{Namespace: os.Getenv("FLAKED_SF_NS"), Horizon: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	hooks := reg.Sonyflake(ctx)
	defer hooks.Close(ctx)
	var next func() (int64, error)
	var mid int
	switch os.Getenv("FLAKED_SF_VERSION") {
	case "v1":
		sf, err := sonyflakev1.New(sonyflakev1.Settings{MachineID: hooks.MachineIDv1, CheckMachineID: hooks.CheckMachineIDv1})
		if err != nil {
			t.Fatal(err)
		}
		next = func() (int64, error) { id, err := sf.NextID(); return int64(id), err }
		m, _ := hooks.MachineIDv1()
		mid = int(m)
	default:
		sf, err := sonyflake.New(sonyflake.Settings{MachineID: hooks.MachineID, CheckMachineID: hooks.CheckMachineID})
		if err != nil {
			t.Fatal(err)
		}
		next = sf.NextID
		mid, _ = hooks.MachineID()
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, mid)
	for range n {
		id, err := next()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(w, id)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestSonyflakeAdapters_TwoProcesses_NoDuplicates(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	const perProcess = 20_000
	for _, version := range []string{"v1", "v2"} {
		t.Run(version, func(t *testing.T) {
			dir := t.TempDir()
			// flaked init, as before the first process of a fleet.
			if _, err := coord.Init(ctxT(t), srv.Client(t), coord.Options{Namespace: "sf" + version, Horizon: time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			var cmds []*exec.Cmd
			for i := range 2 {
				cmd := exec.Command(os.Args[0], "-test.run=^TestSonyflakeChild$", "-test.count=1")
				cmd.Env = append(os.Environ(),
					"FLAKED_SF_URL="+srv.URL(), "FLAKED_SF_NS=sf"+version, "FLAKED_SF_VERSION="+version,
					"FLAKED_SF_N="+strconv.Itoa(perProcess), fmt.Sprintf("FLAKED_SF_OUT=%s/%d.ids", dir, i))
				cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds = append(cmds, cmd)
			}
			for _, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("child: %v", err)
				}
			}
			seen := map[int64]int{}
			var mids []int
			for i := range 2 {
				f, err := os.Open(filepath.Join(dir, fmt.Sprintf("%d.ids", i)))
				if err != nil {
					t.Fatal(err)
				}
				sc := bufio.NewScanner(f)
				sc.Scan()
				mid, _ := strconv.Atoi(sc.Text())
				mids = append(mids, mid)
				count := 0
				for sc.Scan() {
					id, _ := strconv.ParseInt(sc.Text(), 10, 64)
					if p, dup := seen[id]; dup {
						t.Fatalf("ID %d from processes %d and %d: %+v", id, p, i, flake.DefaultLayout().Decompose(uint64(id)))
					}
					seen[id] = i
					if got := int(id & 0xffff); got != mid {
						t.Fatalf("ID %d has machine %d, process leased %d", id, got, mid)
					}
					count++
				}
				f.Close()
				if count != perProcess {
					t.Fatalf("process %d wrote %d IDs", i, count)
				}
			}
			if mids[0] == mids[1] {
				t.Fatalf("both processes ran with machine ID %d", mids[0])
			}
			// Both released their IDs on exit.
			rdb := srv.Client(t)
			for _, m := range mids {
				if n := rdb.Exists(ctxT(t), fmt.Sprintf("{sf%s}:lease:%d", version, m)).Val(); n != 0 {
					t.Fatalf("lease of %d still held after the process closed its hooks", m)
				}
			}
		})
	}
}
