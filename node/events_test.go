package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/rs/zerolog"

	"github.com/flaked/flaked/internal/idtest"
	"github.com/flaked/flaked/node"
)

func itoa(i int) string { return strconv.Itoa(i) }

// modeLines returns the "mode" lines of the node's log as "level
// from->to reason".
func modeLines(t *testing.T, logs *idtest.LogBuffer) []string {
	t.Helper()
	var out []string
	for _, line := range bytes.Split([]byte(logs.String()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var e struct{ Level, Message, From, To, Reason string }
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if e.Message == "mode" {
			out = append(out, fmt.Sprintf("%s %s->%s %s", e.Level, e.From, e.To, e.Reason))
		}
	}
	return out
}

// modeEventReasons returns the mode events in the stream as "from->to reason".
func modeEventReasons(rdbEvents func() []map[string]any) []string {
	var out []string
	for _, v := range rdbEvents() {
		if v["type"] == "mode" {
			out = append(out, fmt.Sprint(v["from"], "->", v["to"], " ", v["reason"]))
		}
	}
	return out
}

// A node's first mode event comes from "none" and its last goes to
// "stopped", both logged at info level and not counted as switches; the
// texts are what audit (history, whois of counter IDs) reads.
func TestModeEvents_StartAndClose(t *testing.T) {
	srv := realRedis(t)
	rdb := client(t, srv)
	events := func() []map[string]any {
		evs, err := rdb.XRange(ctxT(t), "{flaked}:events", "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		var out []map[string]any
		for _, e := range evs {
			out = append(out, e.Values)
		}
		return out
	}
	for _, tc := range []struct {
		mode      node.Options
		wantLogs  []string
		wantEvent []string
	}{
		{node.Options{Mode: node.ModeFlake},
			[]string{"info none->flake start", "info flake->stopped close"},
			[]string{"none->flake start", "flake->stopped close"}},
		{node.Options{Mode: node.ModeCounter},
			[]string{"info none->counter mode counter", "info counter->stopped close"},
			[]string{"none->counter mode counter", "counter->stopped close"}},
	} {
		t.Run(fmt.Sprint(tc.mode.Mode), func(t *testing.T) {
			if err := rdb.Del(ctxT(t), "{flaked}:events").Err(); err != nil {
				t.Fatal(err)
			}
			var logs idtest.LogBuffer
			o := tc.mode
			o.Redis, o.Logger = rdb, zerolog.New(&logs)
			initRegistry(t, o)
			n, err := node.New(ctxT(t), o)
			if err != nil {
				t.Fatal(err)
			}
			if err := n.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := modeLines(t, &logs); !slices.Equal(got, tc.wantLogs) {
				t.Errorf("mode log lines %q, want %q", got, tc.wantLogs)
			}
			if got := modeEventReasons(events); !slices.Equal(got, tc.wantEvent) {
				t.Errorf("mode events %q, want %q", got, tc.wantEvent)
			}
			if n.Switches() != 0 {
				t.Errorf("%d switches, want 0", n.Switches())
			}
		})
	}
}
