// Package poll is the tests' one way to wait for something to happen: a
// condition polled until it holds or a timeout passes, after which the test
// fails naming what it waited for. Polling starts every millisecond and
// backs off to every 50 ms, so a condition met at once costs little time and
// one that asks a daemon or Redis does not hammer it.
//
// Waits on the test's own time belong to an injected clock (clock.Clock,
// clock.Stepped); poll is for what other goroutines and processes do.
package poll

import (
	"testing"
	"time"
)

const (
	first = time.Millisecond
	most  = 50 * time.Millisecond
)

// Until calls cond until it returns true; if within passes first, the test
// fails: "timed out after <within> waiting for <what>".
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := wait(within, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}); err != nil {
		t.Fatalf("timed out after %v waiting for %s", within, what)
	}
}

// UntilNil calls f until it returns nil; if within passes first, the test
// fails naming what and f's last error, which should say what was seen.
func UntilNil(t testing.TB, within time.Duration, what string, f func() error) {
	t.Helper()
	if err := wait(within, f); err != nil {
		t.Fatalf("timed out after %v waiting for %s: %v", within, what, err)
	}
}

// Wait calls f until it returns nil and returns nil, or f's last error once
// within has passed: for helpers that return an error rather than fail a
// test.
func Wait(within time.Duration, f func() error) error {
	return wait(within, f)
}

type notYet struct{}

func (notYet) Error() string { return "condition not met" }

var errNotYet error = notYet{}

func wait(within time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	for pause := first; ; pause = min(2*pause, most) {
		err := f()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(min(pause, time.Until(deadline)+time.Millisecond))
	}
}
