package idtest

import (
	"bytes"
	"sync"
)

// LogBuffer collects a log, a daemon process's output or a node's logger,
// while the test reads it: a bytes.Buffer safe for concurrent use. The
// zero value is ready.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is what was written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
