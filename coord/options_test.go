package coord_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/fallback"
)

// Every lease TTL the daemon accepts (1s..10m) gives a layout settling time
// (LeaseTTL/3 + 1s by default) that the registry and the counter accept,
// and a settling time past the limit is refused naming the range.
func TestOptions_LayoutSettle_FitsEveryLeaseTTL(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: options only
	defer rdb.Close()
	for _, ttl := range []time.Duration{time.Second, time.Minute, 10 * time.Minute} {
		reg, err := coord.NewRegistry(rdb, coord.Options{LeaseTTL: ttl})
		if err != nil {
			t.Fatalf("lease TTL %v: %v", ttl, err)
		}
		settle := reg.Options().LayoutSettle
		if want := ttl/3 + time.Second; settle != want {
			t.Fatalf("lease TTL %v: layout settle %v, want %v", ttl, settle, want)
		}
		if _, err := fallback.New(rdb, fallback.Options{LayoutSettle: settle}); err != nil {
			t.Fatalf("the counter refuses the registry's layout settle %v: %v", settle, err)
		}
	}
	_, err := coord.NewRegistry(rdb, coord.Options{LayoutSettle: coord.MaxLayoutSettle + time.Second})
	if !errors.Is(err, coord.ErrInvalidOptions) || !strings.Contains(err.Error(), "valid range is 0..5m0s") {
		t.Fatalf("layout settle past the limit: %v, want an error naming the range 0..5m0s", err)
	}
}
