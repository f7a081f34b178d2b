package main

import (
	"testing"
	"time"
)

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0", time.Millisecond: "1ms", 10 * time.Millisecond: "10ms", time.Second: "1s", 1500 * time.Millisecond: "1.5s",
		time.Minute: "1m", 10 * time.Minute: "10m", 90 * time.Second: "1m30s", time.Hour: "1h", 24 * time.Hour: "24h",
		90 * time.Minute: "1h30m", time.Hour + time.Second: "1h0m1s", -time.Second: "-1s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// A bounded duration keeps its value when refused, and String reads back
// as a duration (c.Duration parses it).
func TestBoundedDuration_Set(t *testing.T) {
	b := &boundedDuration{v: 10 * time.Second, lo: time.Second, hi: 10 * time.Minute}
	for _, s := range []string{"999ms", "10m1s", "ten", ""} {
		if err := b.Set(s); err == nil || err.Error() != "want a duration in 1s..10m" {
			t.Errorf("Set(%q): %v", s, err)
		}
	}
	if b.String() != "10s" {
		t.Fatalf("after refusals: %s", b)
	}
	for _, s := range []string{"1s", "10m", "2m30s"} {
		if err := b.Set(s); err != nil {
			t.Errorf("Set(%q): %v", s, err)
		}
		if d, err := time.ParseDuration(b.String()); err != nil || d.String() != b.String() {
			t.Errorf("String %q does not parse back", b.String())
		}
	}
}
