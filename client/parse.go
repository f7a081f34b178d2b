package client

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/flake"
)

// Modes an ID can be issued in, as PARSE reports them.
const (
	ModeFlake   = "flake"   // time-based, under a leased machine ID
	ModeCounter = "counter" // counter fallback, under the reserved machine ID
)

// Parts are the fields of an ID, as the daemon's PARSE reports them.
type Parts struct {
	ID        uint64
	Time      time.Time // start of the tick, UTC (PARSE prints it to the millisecond)
	Tick      int64
	Sequence  int
	MachineID int
	Mode      string // ModeFlake or ModeCounter
	Region    int    // the machine ID's region; 0 in a layout without regions
}

// Layout returns the fleet's ID layout, from the INFO of the first daemon
// that answers; it is asked for once and then remembered (the layout is
// fixed for the life of a fleet).
func (c *Client) Layout(ctx context.Context) (flake.Layout, error) {
	if l := c.layout.Load(); l != nil {
		return *l, nil
	}
	var l flake.Layout
	err := c.do(ctx, "INFO flaked", func(ctx context.Context, rdb *redis.Client) error {
		info, err := rdb.Info(ctx, "flaked").Result()
		if err != nil {
			return err
		}
		l, err = layoutFromInfo(info)
		return err
	})
	if err != nil {
		return flake.Layout{}, err
	}
	c.layout.Store(&l)
	return l, nil
}

// Parse decodes an ID locally, with the layout the daemons report; the
// result equals the daemon's PARSE reply. Only the first call of Parse or
// Layout asks a daemon (INFO), bounded by the timeouts of Options for
// each daemon; later calls do no I/O.
func (c *Client) Parse(id uint64) (Parts, error) {
	if id > flake.MaxID {
		return Parts{}, fmt.Errorf("flaked client: parse: %w %d: want 0..%d", flake.ErrInvalidID, id, uint64(flake.MaxID))
	}
	l := c.layout.Load()
	if l == nil {
		per := c.opts.DialTimeout + c.opts.WriteTimeout + c.opts.ReadTimeout
		ctx, cancel := context.WithTimeout(c.ctx, time.Duration(len(c.daemons))*per)
		defer cancel()
		got, err := c.Layout(ctx)
		if err != nil {
			return Parts{}, err
		}
		l = &got
	}
	if err := l.CheckID(id); err != nil { // a 53-bit fleet's IDs are below 2^53
		return Parts{}, fmt.Errorf("flaked client: parse: %w", err)
	}
	return decompose(*l, id), nil
}

func decompose(l flake.Layout, id uint64) Parts {
	p := l.Decompose(id)
	mode := ModeFlake
	if l.IsCounterMachineID(p.MachineID) {
		mode = ModeCounter
	}
	return Parts{ID: p.ID, Time: p.Time.UTC(), Tick: p.Tick, Sequence: p.Sequence, MachineID: p.MachineID, Mode: mode, Region: p.Region}
}

// layoutFromInfo reads the "layout:" line of INFO. Every such line must
// agree (the daemon may report it from more than one source).
func layoutFromInfo(info string) (flake.Layout, error) {
	var canon string
	for _, line := range strings.Split(info, "\n") {
		v, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "layout:")
		if !ok {
			continue
		}
		if canon != "" && v != canon {
			return flake.Layout{}, replyError("INFO reports two layouts, %q and %q", canon, v)
		}
		canon = v
	}
	if canon == "" {
		return flake.Layout{}, replyError("INFO has no layout line: is this a flaked daemon?")
	}
	l, err := flake.ParseLayout(canon)
	if err != nil {
		return flake.Layout{}, replyError("INFO layout: %v", err)
	}
	return l, nil
}
