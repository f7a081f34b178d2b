package doctor_test

import (
	"context"
	"testing"

	"github.com/flaked/flaked/doctor"
	"github.com/flaked/flaked/internal/redistest"
)

// BenchmarkStartChecks is what flaked serve's start checks add to a
// start (doctor.Run as the node's user, on a loopback redis-server), with
// one TIME round trip as the reference, alternating:
//
//	go test -run XXX -bench StartChecks -benchtime 200x -count 3 ./doctor/
func BenchmarkStartChecks(b *testing.B) {
	redistest.Require(b)
	srv := redistest.Start(b, redistest.Options{})
	rdb := srv.Client(b)
	ctx := context.Background()
	b.Run("time-round-trip", func(b *testing.B) {
		for range b.N {
			if err := rdb.Time(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("run-as-node", func(b *testing.B) {
		for range b.N {
			if rs := doctor.Run(ctx, doctor.Target{Redis: rdb, AsNode: true}); doctor.Worst(rs) == doctor.Unsafe {
				b.Fatal(rs)
			}
		}
	})
}
