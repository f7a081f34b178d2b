package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flaked/flaked/client"
)

// Fault: every daemon hangs (accepts, never answers), each longer than a
// call's bound, with the default ReadTimeout (2 s per daemon) and three
// daemons to fail over to. The promise of Options.Wait (no call
// waits more than a second): each call, retries and failover included,
// returns within Wait with an *Error naming the daemons tried, never after
// 3 x ReadTimeout. Each way in: NextID (plain, from prefetched batches,
// from blocks), NextIDs, NextSeq.
func TestWait_AllDaemonsHung_EveryCallWithinWait(t *testing.T) {
	const wait = 300 * time.Millisecond
	const slack = 400 * time.Millisecond // the scheduler's, under -race on a loaded machine
	addrs := []string{blackHole(t), blackHole(t), blackHole(t)}
	calls := []struct {
		name string
		opts client.Options
		call func(c *client.Client) error
	}{
		{"NextID", client.Options{}, func(c *client.Client) error { _, err := c.NextID(context.Background()); return err }},
		{"NextID from blocks", client.Options{Prefetch: 100}, func(c *client.Client) error { _, err := c.NextID(context.Background()); return err }},
		{"NextIDs", client.Options{}, func(c *client.Client) error { _, err := c.NextIDs(context.Background(), 10); return err }},
		{"NextSeq", client.Options{}, func(c *client.Client) error { _, err := c.NextSeq(context.Background(), "orders"); return err }},
	}
	for _, tc := range calls {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.Addrs, o.Wait = addrs, wait
			c := newClient(t, o)
			start := time.Now()
			err := tc.call(c)
			if took := time.Since(start); took > wait+slack {
				t.Errorf("%s took %v, more than Wait %v (+%v slack)", tc.name, took, wait, slack)
			}
			if err == nil {
				t.Fatal("an ID from daemons that never answer")
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want one wrapping DeadlineExceeded", err)
			}
		})
	}
}

func TestOptions_Wait_RangeNamed(t *testing.T) {
	_, err := client.New(client.Options{Addrs: []string{"127.0.0.1:1"}, Wait: -time.Second})
	if !errors.Is(err, client.ErrInvalidOptions) || !strings.Contains(err.Error(), "Wait") || !strings.Contains(err.Error(), "valid range") {
		t.Fatalf("err = %v, want ErrInvalidOptions naming Wait and its range", err)
	}
}
