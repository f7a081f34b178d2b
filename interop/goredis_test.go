package interop

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestGoRedis_Reconnect: go-redis with its defaults (only the address,
// password or CA given) gets an ID with the first command after a daemon
// restart: it checks a pooled connection before use, and retries a command
// that failed on a closed one (MaxRetries 3).
func TestGoRedis_Reconnect(t *testing.T) {
	f := startFlavours(t)
	for _, c := range []struct {
		d   *daemon
		opt redis.Options
	}{
		{f.plain, redis.Options{}},
		{f.auth, redis.Options{Password: password}},
		{f.tls, redis.Options{TLSConfig: &tls.Config{RootCAs: caPool(t, f.ca)}}},
	} {
		t.Run(c.d.name, func(t *testing.T) {
			c.opt.Addr = c.d.addr()
			rdb := redis.NewClient(&c.opt)
			defer rdb.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			before, err := rdb.Do(ctx, "NEXTID").Uint64()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.d.restart(); err != nil {
				t.Fatal(err)
			}
			after, err := rdb.Do(ctx, "NEXTID").Uint64()
			if err != nil {
				t.Fatalf("the first command after the restart: %v", err)
			}
			if after <= before {
				t.Errorf("ID %d after the restart, %d before", after, before)
			}
		})
	}
}
