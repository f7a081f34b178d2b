package redisinfo_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/redisinfo"
)

// replication is INFO replication as redis-server 7 writes it: a master
// with an online replica, one still syncing, and an IPv6 one.
const replication = "# Replication\r\n" +
	"role:master\r\n" +
	"connected_slaves:3\r\n" +
	"slave0:ip=10.0.0.11,port=6379,state=online,offset=5203,lag=0\r\n" +
	"slave1:ip=10.0.0.12,port=6380,state=wait_bgsave,offset=0,lag=12\r\n" +
	"slave2:ip=::1,port=6381,state=online,offset=5190,lag=1\r\n" +
	"master_failover_state:no-failover\r\n" +
	"master_replid:8f5c9e1bd2b8e1f0c8a7d6e5f4a3b2c1d0e9f8a7\r\n" +
	"master_repl_offset:5203\r\n" +
	"slave_read_only:1\r\n" +
	"slave_repl_offset:5203\r\n"

func TestField(t *testing.T) {
	for _, c := range []struct {
		field, want string
		ok          bool
	}{
		{"role", "master", true},
		{"connected_slaves", "3", true},
		{"master_repl_offset", "5203", true},
		{"master_replid", "8f5c9e1bd2b8e1f0c8a7d6e5f4a3b2c1d0e9f8a7", true},
		{"master", "", false}, // a prefix of other fields' names
		{"run_id", "", false}, // another section's
		{"Replication", "", false},
	} {
		if got, ok := redisinfo.Field(replication, c.field); got != c.want || ok != c.ok {
			t.Errorf("Field(%q) = %q, %v; want %q, %v", c.field, got, ok, c.want, c.ok)
		}
	}
	// "\n" ends lines as well as "\r\n" (INFO as a script returns it).
	if got, _ := redisinfo.Field(strings.ReplaceAll(replication, "\r\n", "\n"), "role"); got != "master" {
		t.Errorf("role with \\n line ends = %q", got)
	}
}

func TestFields(t *testing.T) {
	f := redisinfo.Fields(replication)
	if f["role"] != "master" || f["slave_repl_offset"] != "5203" || f["slave0"] != "ip=10.0.0.11,port=6379,state=online,offset=5203,lag=0" {
		t.Errorf("Fields = %v", f)
	}
	if _, ok := f["# Replication"]; ok {
		t.Errorf("a section header read as a field: %v", f)
	}
}

func TestReplicas(t *testing.T) {
	got := redisinfo.Replicas(replication)
	want := []redisinfo.Replica{
		{IP: "10.0.0.11", Port: "6379", State: "online", Offset: 5203, Lag: 0},
		{IP: "10.0.0.12", Port: "6380", State: "wait_bgsave", Offset: 0, Lag: 12},
		{IP: "::1", Port: "6381", State: "online", Offset: 5190, Lag: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Replicas =\n%+v\nwant\n%+v", got, want)
	}
	var addrs []string
	online := 0
	for _, r := range got {
		addrs = append(addrs, r.Addr())
		if r.Online() {
			online++
		}
	}
	if strings.Join(addrs, " ") != "10.0.0.11:6379 10.0.0.12:6380 [::1]:6381" || online != 2 {
		t.Errorf("addresses %v, %d online", addrs, online)
	}
	// A replica's own INFO lists none (its slave_* fields are not replicas).
	if r := redisinfo.Replicas("role:slave\r\nslave_repl_offset:10\r\nslave_priority:100\r\nconnected_slaves:0\r\n"); len(r) != 0 {
		t.Errorf("a replica's INFO: %+v", r)
	}
}

func TestMaster(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	if m, err := redisinfo.Master(context.Background(), c, "{flaked}:meta"); m != c || err != nil {
		t.Errorf("Master of a standalone client = %p, %v; want the client itself", m, err)
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": mr.Addr()}})
	t.Cleanup(func() { ring.Close() })
	if m, err := redisinfo.Master(context.Background(), ring, "{flaked}:meta"); m != nil || !errors.Is(err, redisinfo.ErrClientType) {
		t.Errorf("Master of a Ring = %v, %v; want ErrClientType", m, err)
	}
}

func TestNoPerm(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	for _, reply := range []string{
		"NOPERM User flaked has no permissions to run the 'config|get' command",
		"ERR The user executing the script can't run this command or subcommand",
	} {
		mr.SetError(reply)
		err := fmt.Errorf("claim: %w", c.Get(context.Background(), "k").Err())
		if !redisinfo.IsNoPerm(err) {
			t.Errorf("IsNoPerm(%v) = false", err)
		}
		if got := redisinfo.ExplainNoPerm(err); !errors.Is(got, err) || !strings.HasSuffix(got.Error(), "("+redisinfo.ACLHint+")") {
			t.Errorf("ExplainNoPerm(%v) = %v", err, got)
		}
	}
	mr.SetError("ERR something else")
	other := c.Get(context.Background(), "k").Err()
	// Text that quotes a refusal is not one: the hint is added where the
	// reply is, once.
	quoted := errors.New("the fleet's Redis is unsafe: NOPERM on INFO")
	for _, err := range []error{nil, other, quoted} {
		if redisinfo.IsNoPerm(err) || redisinfo.ExplainNoPerm(err) != err {
			t.Errorf("IsNoPerm(%v) = true, or ExplainNoPerm changed it", err)
		}
	}
	if !redisinfo.HasNoPerm(quoted.Error()) || redisinfo.HasNoPerm(other.Error()) {
		t.Errorf("HasNoPerm: %q should, %q should not", quoted, other)
	}
}
