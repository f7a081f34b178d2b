package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// explainNoPerm adds the ACL hint to an error that is (or wraps) Redis's
// NOPERM, the reply of a command or key the Redis user may not use (also
// from inside a script). Redis names the command or key; what flaked was
// doing is already in err.
func explainNoPerm(err error) error {
	if !isNoPerm(err) {
		return err
	}
	return fmt.Errorf("%w (the Redis user lacks a permission flaked needs: see \"Redis ACLs\" in docs/operating.md and deploy/redis/acl.conf)", err)
}

func isNoPerm(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.Contains(re.Error(), "NOPERM")
}

// checkRedisACL refuses, at start, a Redis user that may not run INFO:
// guard.lua reads the server's identity with it, and a refusal there
// (pcall) would only turn the data-loss detection off, silently. Other
// errors pass: Redis away is the node's to handle, and a server without
// those sections (some proxies) is documented as having no detection.
func checkRedisACL(ctx context.Context, rdb redis.UniversalClient) error {
	if err := rdb.Info(ctx, "server").Err(); isNoPerm(err) {
		return fmt.Errorf("redis INFO server (guard.lua reads run_id and master_replid with it to notice Redis losing writes): %w", err)
	}
	return nil
}
