package node_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/flaked/flaked/fallback"
	"github.com/flaked/flaked/internal/redistest"
	"github.com/flaked/flaked/node"
)

// Every option out of its range is refused with ErrInvalidOptions and a
// message naming the option and the valid range.
func TestOptions_OutOfRange_ErrorNamesRange(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    node.Options
		want string // in the error
	}{
		{"mode stopped", node.Options{Mode: node.ModeStopped}, `mode "stopped": want flake, counter or auto`},
		{"mode 9", node.Options{Mode: node.Mode(9)}, `mode "Mode(9)": want flake, counter or auto`},
		{"machine IDs 257", node.Options{MachineIDs: 257}, "machine IDs 257: valid range is 1..256"},
		{"machine IDs -1", node.Options{MachineIDs: -1}, "machine IDs -1: valid range is 1..256"},
		{"max lead -1s", node.Options{MaxLead: -time.Second}, "max lead -1s: valid range is 0s..1h"},
		{"max lead 2h", node.Options{MaxLead: 2 * time.Hour}, "max lead 2h0m0s: valid range is 0s..1h"},
		{"reserve ahead 1ms", node.Options{ReserveAhead: time.Millisecond}, "reserve ahead 1ms: valid range is 10ms..1h"},
		{"reserve ahead 2h", node.Options{ReserveAhead: 2 * time.Hour}, "reserve ahead 2h0m0s: valid range is 10ms..1h"},
		{"check interval 1ms", node.Options{CheckInterval: time.Millisecond}, "check interval 1ms: valid range is 10ms..1m"},
		{"check interval 2m", node.Options{CheckInterval: 2 * time.Minute}, "check interval 2m0s: valid range is 10ms..1m"},
		{"recover after -1s", node.Options{RecoverAfter: -time.Second}, "recover after -1s: valid range is 0s..1h"},
		{"recover after 2h", node.Options{RecoverAfter: 2 * time.Hour}, "recover after 2h0m0s: valid range is 0s..1h"},
		{"retry interval 1ms", node.Options{RetryInterval: time.Millisecond}, "retry interval 1ms: valid range is 10ms..1m"},
		{"retry interval 2m", node.Options{RetryInterval: 2 * time.Minute}, "retry interval 2m0s: valid range is 10ms..1m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := node.New(context.Background(), tc.o)
			if err == nil {
				n.Close(context.Background())
				t.Fatal("accepted")
			}
			if !errors.Is(err, node.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want ErrInvalidOptions naming %q", err, tc.want)
			}
		})
	}
}

// The limits themselves are accepted. (MaxLead and ReserveAhead at 1h are
// not: the horizon they make is beyond the registry's.)
func TestOptions_AtTheLimits_Accepted(t *testing.T) {
	for _, o := range []node.Options{
		{CheckInterval: time.Minute, RecoverAfter: time.Hour, RetryInterval: time.Minute},
		{MaxLead: time.Nanosecond, ReserveAhead: 10 * time.Millisecond, CheckInterval: 10 * time.Millisecond, RetryInterval: 10 * time.Millisecond},
	} {
		n, err := node.New(ctxT(t), o)
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if err := n.Close(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
}

// Counter mode holds at least what a flake reservation reaches, so a
// Redis outage (or replicas that do not acknowledge) a fleet's
// --reserve-ahead rides out in flake mode is ridden out in counter mode
// too: the hold is the reach, the counter's lead (how far ahead of Redis
// TIME its values go, which bounds what a buffer can hold) is as long as
// a flake reservation reaches (max lead + reserve ahead), and a segment
// may hold what the counter machine ID issues in twice the hold
// (fallback.TestCounter_HoldAtHighRate_RidesOutRedisAway).
func TestOptions_CounterHoldsTheReach(t *testing.T) {
	for _, tc := range []struct {
		ahead, want, lead time.Duration
		segment           int
	}{
		{time.Second, fallback.DefaultHold, 2 * time.Second, 2 * 10 * 25_600},
		{0, node.DefaultReserveAhead, 13 * time.Second, 2 * 12 * 25_600},
		{20 * time.Second, 20 * time.Second, 21 * time.Second, 2 * 20 * 25_600},
	} {
		n, err := node.New(ctxT(t), node.Options{ReserveAhead: tc.ahead})
		if err != nil {
			t.Fatal(err)
		}
		co := n.CounterOptions()
		if co.Hold != tc.want || co.MaxLead != tc.lead || co.MaxSegment != tc.segment {
			t.Errorf("reserve ahead %v: counter hold %v, lead %v, max segment %d; want %v, %v, %d",
				tc.ahead, co.Hold, co.MaxLead, co.MaxSegment, tc.want, tc.lead, tc.segment)
		}
		if err := n.Close(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
}

// A node whose reach is longer than the fleet's horizon (another
// --reserve-ahead than flaked init's) is capped at the fleet's by
// renew.lua, which keeps IDs unique (coord's TestInit_FixesTheFleetHorizon)
// but rides out less of a Redis outage than configured: the node says so.
func TestOptions_ReachLongerThanTheFleets_Warned(t *testing.T) {
	_, rdb := redistest.Mini(t)
	first := newNode(t, node.Options{Redis: rdb, ReserveAhead: time.Second}) // fixes the fleet's horizon at its reach's
	if _, err := first.NextID(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	long := newNode(t, node.Options{Redis: rdb, ReserveAhead: 10 * time.Second,
		Logger: zerolog.New(&logs).Level(zerolog.WarnLevel)})
	if _, err := long.NextID(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "the fleet's horizon (set by flaked init) is shorter than this node's") {
		t.Fatalf("no warning of the capped reach; logs:\n%s", logs.String())
	}
	logs.Reset()
	same := newNode(t, node.Options{Redis: rdb, ReserveAhead: time.Second, Logger: zerolog.New(&logs).Level(zerolog.WarnLevel)})
	if _, err := same.NextID(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), "fleet's horizon") {
		t.Fatalf("a node with the fleet's reach warned:\n%s", logs.String())
	}
}
