package doctor

import (
	"context"
	"fmt"
	"strings"
)

// acl: the connected user may run every command deploy/redis/acl.conf
// grants its flaked-node user, on the namespace's keys (a script's calls
// are checked against the caller's ACL as well). ACL DRYRUN answers that
// exactly, but needs ACL permissions a node's user lacks: then the check
// cannot tell (costly); the identity check still runs the one command
// beyond the keys, INFO, from a script.
func init() { register("acl", false, checkACL) }

// nodeCommands are what flaked-node may run (deploy/redis/acl.conf; a test
// keeps the two equal), each with arguments for ACL DRYRUN; "K" stands for
// a key of the namespace.
var nodeCommands = [][]string{
	{"evalsha", "0000000000000000000000000000000000000000", "1", "K"},
	{"eval", "return 1", "1", "K"},
	{"get", "K"}, {"set", "K", "v"}, {"del", "K"}, {"exists", "K"}, {"pexpire", "K", "1000"},
	{"hget", "K", "f"}, {"hmget", "K", "f"}, {"hset", "K", "f", "v"}, {"hdel", "K", "f"},
	{"sadd", "K", "m"}, {"srem", "K", "m"}, {"srandmember", "K", "8"}, {"sismember", "K", "m"},
	{"hgetall", "K"}, {"xadd", "K", "*", "f", "v"}, {"time"}, {"info", "server", "replication", "memory"},
	{"wait", "0", "0"}, // after each grant (the split brain's wait)
}

func checkACL(ctx context.Context, e *env) []Result {
	ss, err := e.servers(ctx)
	if err != nil || e.t.AsNode {
		return nil
	}
	key := "{" + e.t.Namespace + "}:meta"
	var out []Result
	for _, s := range ss {
		r := Result{Server: s.addr}
		user, err := s.c.Do(ctx, "ACL", "WHOAMI").Text()
		if err != nil {
			r.Status, r.Detail = Costly, "cannot tell: ACL WHOAMI: "+err.Error()
			r.Fix = "run flaked doctor as a user with +acl|whoami +acl|dryrun to check the node user's permissions"
			out = append(out, r)
			continue
		}
		var refused []string
		cannot := ""
		for _, cmd := range nodeCommands {
			args := []any{"ACL", "DRYRUN", user}
			for _, a := range cmd {
				if a == "K" {
					a = key
				}
				args = append(args, a)
			}
			res, err := s.c.Do(ctx, args...).Text()
			if err != nil {
				cannot = err.Error()
				break
			}
			if res != "OK" {
				refused = append(refused, fmt.Sprintf("%s (%s)", cmd[0], res))
			}
		}
		switch {
		case cannot != "":
			r.Status, r.Detail = Costly, "cannot tell: ACL DRYRUN as "+user+": "+cannot
			r.Fix = "grant the user running flaked doctor +acl|dryrun, or check the user against deploy/redis/acl.conf by hand"
		case len(refused) > 0:
			r.Status = Unsafe
			r.Detail = "user " + user + " may not run: " + strings.Join(refused, "; ")
			r.Fix = "give the user deploy/redis/acl.conf's flaked-node rules (on ~{" + e.t.Namespace + "}:*)"
		default:
			r.Detail = "user " + user + " may run every command of deploy/redis/acl.conf's flaked-node on " + key
		}
		out = append(out, r)
	}
	return out
}

// NodeCommands names the commands the acl check asks about.
func NodeCommands() []string {
	out := make([]string, len(nodeCommands))
	for i, c := range nodeCommands {
		out[i] = c[0]
	}
	return out
}
