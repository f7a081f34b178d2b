package seq

import (
	"github.com/flaked/flaked/internal/redistest"

	"context"
	"testing"
)

// BenchmarkTryNext is the daemon's hot path for NEXTSEQ: one value from
// the segment in use (fetches run in the background on miniredis).
func BenchmarkTryNext(b *testing.B) {
	_, rdb := redistest.Mini(b) // miniredis answering guard.lua's INFO
	s := newSeqs(b, rdb)
	defer s.Close(context.Background())
	ctx := context.Background()
	if err := s.Create(ctx, "b", TagOptions{Step: 100000, Rate: MaxValue - 1}); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Next(ctx, "b"); err != nil {
		b.Fatal(err)
	}
	tag := []byte("b")
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var dst [1]int64
		for pb.Next() {
			if !s.TryNext(tag, dst[:]) {
				if _, err := s.NextN(ctx, "b", dst[:]); err != nil {
					b.Error(err)
					return
				}
			}
		}
	})
}
