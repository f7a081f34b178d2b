// Package redisinfo reads what flaked asks a Redis deployment about
// itself: the fields of an INFO text, the replicas INFO replication lists,
// the master that holds a key (a standalone or Sentinel-found server
// itself, on Cluster the master of the key's slot), and Redis's ACL
// refusal (NOPERM) with the hint that goes with it. coord, doctor,
// replwait, cmd/flaked and the tests' Redis set-up share it.
package redisinfo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Field returns the value of field in an INFO text ("name:value" lines,
// "\r\n" or "\n" ended, "# Section" headers), and whether it is there.
func Field(info, field string) (string, bool) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v, true
		}
	}
	return "", false
}

// Fields returns every "name:value" field of an INFO text.
func Fields(info string) map[string]string {
	fields := map[string]string{}
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

// Replica is one replica a master lists in INFO replication:
// slaveN:ip=..,port=..,state=..,offset=..,lag=..
type Replica struct {
	IP, Port string
	State    string // "online" once it acknowledges; wait_bgsave, send_bulk before
	Offset   int64  // replication offset it acknowledged
	Lag      int64  // seconds since its last acknowledgement
}

// Addr is the replica's "host:port" (IPv6 in brackets).
func (r Replica) Addr() string { return net.JoinHostPort(r.IP, r.Port) }

// Online reports whether the replica is in state online, the state in
// which it acknowledges writes (WAIT counts it).
func (r Replica) Online() bool { return r.State == "online" }

// Replicas returns the replicas listed in an INFO replication text, in
// the order listed.
func Replicas(info string) []Replica {
	var out []Replica
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !isSlaveN(k) || !strings.Contains(v, "ip=") {
			continue
		}
		var r Replica
		for _, kv := range strings.Split(v, ",") {
			name, val, _ := strings.Cut(kv, "=")
			switch name {
			case "ip":
				r.IP = val
			case "port":
				r.Port = val
			case "state":
				r.State = val
			case "offset":
				r.Offset, _ = strconv.ParseInt(val, 10, 64)
			case "lag":
				r.Lag, _ = strconv.ParseInt(val, 10, 64)
			}
		}
		out = append(out, r)
	}
	return out
}

// isSlaveN reports a key "slave" followed by digits (not slave_repl_offset
// and its kin).
func isSlaveN(k string) bool {
	n, ok := strings.CutPrefix(k, "slave")
	if !ok || n == "" {
		return false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ErrClientType is returned by Master for a client that is not one
// server's nor a Cluster's (a Ring, say): flaked builds neither.
var ErrClientType = errors.New("want a standalone, Sentinel or Cluster client")

// Master returns the client of the master that holds key: rdb itself for a
// standalone server or one found through Sentinel (both *redis.Client), on
// Cluster the node client of key's slot. A pipeline on it goes out on one
// connection to the server that runs a script on key, and INFO on it
// describes that server.
func Master(ctx context.Context, rdb redis.UniversalClient, key string) (*redis.Client, error) {
	switch c := rdb.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		m, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("the master of %s: %w", key, err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("redis client %T: %w", rdb, ErrClientType)
}

// ACLHint is what flaked adds to an ACL refusal: where the permissions it
// needs are written down.
const ACLHint = `the Redis user lacks a permission flaked needs: see "Redis ACLs" in docs/operating.md and deploy/redis/acl.conf`

// IsNoPerm reports whether err is (or wraps) Redis's ACL refusal of a
// command or key: NOPERM, or "can't run this command" (a refusal from
// inside a script, which some Redis versions word so).
func IsNoPerm(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && HasNoPerm(re.Error())
}

// HasNoPerm reports an ACL refusal in a message that quotes Redis's reply
// (a report built from several).
func HasNoPerm(msg string) bool {
	return strings.Contains(msg, "NOPERM") || strings.Contains(msg, "can't run this command")
}

// ExplainNoPerm adds ACLHint to an error that is an ACL refusal, and
// returns any other error as it is.
func ExplainNoPerm(err error) error {
	if !IsNoPerm(err) {
		return err
	}
	return fmt.Errorf("%w (%s)", err, ACLHint)
}
