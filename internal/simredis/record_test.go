package simredis

import (
	"reflect"
	"testing"
)

// RecordCommands counts every command run, from clients and scripts,
// under its lower-case name (with the subcommand for SCRIPT and XINFO),
// unknown ones included, and only while on.
func TestRecordCommands(t *testing.T) {
	s := newServer(newClock(), 1)
	s.Do([]string{"SET", "before", "x"})
	stop := RecordCommands()
	s.Do([]string{"SET", "k", "v"})
	s.Do([]string{"EVAL", "return redis.call('GET', KEYS[1])", "1", "k"})
	s.Do([]string{"INCR", "k"})
	s.Do([]string{"SCRIPT", "LOAD", "return 1"})
	got := stop()
	s.Do([]string{"DEL", "k"})
	want := map[string]int{"set": 1, "eval": 1, "get": 1, "incr": 1, "script load": 1}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("recorded %v, want %v", got, want)
	}
	if !Implemented("get") || !Implemented("EVALSHA") || Implemented("incr") || Implemented("script") {
		t.Error("Implemented disagrees with the command table")
	}
}
