package coord_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/coord"
	"github.com/flaked/flaked/flake"
	"github.com/flaked/flaked/internal/redistest"
)

func layoutOf(t *testing.T, s flake.Settings) flake.Layout {
	t.Helper()
	l, err := s.Layout()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A node whose ID width differs from the fleet's is refused, both ways,
// and the error names both layouts: the same sequence and machine bits in
// 53 and 63 bits give IDs that can collide.
func TestLayoutWidthMismatch_Refused_NamesBoth(t *testing.T) {
	narrow := layoutOf(t, flake.Settings{BitsID: 53, BitsSequence: 8, BitsMachineID: 8})
	wide := layoutOf(t, flake.Settings{BitsSequence: 8, BitsMachineID: 8})
	for _, pair := range [][2]flake.Layout{{wide, narrow}, {narrow, wide}} {
		backends(t, func(t *testing.T, rdb redis.UniversalClient) {
			fleet, node := pair[0], pair[1]
			// The fleet's layout stored as flaked init does (a layout an
			// owner restored is refused alike:
			// TestGuard_TotalLoss_OwnerRestoresLayout_OtherLayoutRefused).
			if err := redistest.InitRegistry(ctxT(t), rdb, coord.DefaultNamespace, fleet.String()); err != nil {
				t.Fatal(err)
			}
			_, err := newReg(t, rdb, coord.Options{Layout: node}).Claim(ctxT(t), coord.ClaimOptions{})
			if !errors.Is(err, coord.ErrLayoutMismatch) || !strings.Contains(err.Error(), fleet.String()) || !strings.Contains(err.Error(), node.String()) {
				t.Fatalf("fleet %v, node %v: err = %v, want ErrLayoutMismatch naming both", fleet, node, err)
			}
		})
	}
}

// A registry stores its region with the layout: a node of another region,
// or with other region bits, or without regions, is refused and both are
// named.
func TestRegionMismatch_Refused_NamesBoth(t *testing.T) {
	fleet := layoutOf(t, flake.Settings{BitsMachineID: 4, BitsRegion: 1, Region: 0})
	for _, node := range []flake.Layout{
		layoutOf(t, flake.Settings{BitsMachineID: 4, BitsRegion: 1, Region: 1}),
		layoutOf(t, flake.Settings{BitsMachineID: 4, BitsRegion: 2, Region: 0}),
		layoutOf(t, flake.Settings{BitsMachineID: 4}),
	} {
		backends(t, func(t *testing.T, rdb redis.UniversalClient) {
			if err := redistest.InitRegistry(ctxT(t), rdb, coord.DefaultNamespace, fleet.String()); err != nil { // as above
				t.Fatal(err)
			}
			_, err := newReg(t, rdb, coord.Options{Layout: node}).Claim(ctxT(t), coord.ClaimOptions{})
			if !errors.Is(err, coord.ErrLayoutMismatch) || !strings.Contains(err.Error(), fleet.String()) || !strings.Contains(err.Error(), node.String()) {
				t.Fatalf("node %v: err = %v, want ErrLayoutMismatch naming both", node, err)
			}
		})
	}
}

// A region's registry leases only machine IDs of its region, never its
// counter's, even when its set holds IDs of other regions (claim.lua adds
// random members of the set to the candidates): region 1 of 2 with 4
// machine bits has 8..14, and the eighth claim finds nothing.
func TestRegion_ClaimsOnlyInsideItsRange(t *testing.T) {
	l := layoutOf(t, flake.Settings{BitsMachineID: 4, BitsRegion: 1, Region: 1})
	if l.MinMachineID() != 8 || l.MaxMachineID() != 14 || l.CounterMachineID() != 15 {
		t.Fatalf("region 1: machine IDs %d..%d, counter %d", l.MinMachineID(), l.MaxMachineID(), l.CounterMachineID())
	}
	backends(t, func(t *testing.T, rdb redis.UniversalClient) {
		for id := 0; id < 16; id++ { // a set polluted with every ID
			rdb.SAdd(ctxT(t), "{flaked}:machines", strconv.Itoa(id))
		}
		reg := newReg(t, rdb, coord.Options{Layout: l, MaxWait: 50 * time.Millisecond})
		got := map[int]bool{}
		for range l.LeasableMachineIDs() {
			lease, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
			if err != nil {
				t.Fatal(err)
			}
			id := lease.MachineIDs()[0]
			if id < 8 || id > 14 || got[id] {
				t.Fatalf("claimed machine ID %d: want a new one in 8..14 (got %v)", id, got)
			}
			got[id] = true
		}
		_, err := reg.Claim(ctxT(t), coord.ClaimOptions{})
		if !errors.Is(err, coord.ErrNoMachineID) || !strings.Contains(err.Error(), "region 1: 8..14") {
			t.Fatalf("claim in a full region: %v, want ErrNoMachineID naming the region's range", err)
		}
		if _, err := reg.Claim(ctxT(t), coord.ClaimOptions{Count: 8}); !errors.Is(err, coord.ErrInvalidOptions) || !strings.Contains(err.Error(), "1..7") {
			t.Fatalf("8 IDs in a region of 7: %v", err)
		}
	})
}

// The sonyflake hooks refuse a registry of narrower IDs: sonyflake's are
// 63 bits, another layout than the fleet's.
func TestSonyflake_RefusesNarrowLayout(t *testing.T) {
	l := layoutOf(t, flake.Settings{BitsID: 53, BitsSequence: 8, BitsMachineID: 8})
	reg := newReg(t, miniRedis(t), coord.Options{Layout: l})
	if _, err := reg.Sonyflake(ctxT(t)).MachineID(); !errors.Is(err, coord.ErrInvalidOptions) || !strings.Contains(err.Error(), "53-bit") {
		t.Fatalf("MachineID on a 53-bit registry: %v, want ErrInvalidOptions naming the width", err)
	}
}
