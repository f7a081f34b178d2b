package main

import (
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
