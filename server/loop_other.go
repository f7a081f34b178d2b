//go:build !linux

package server

import "errors"

// loop is Linux-only (epoll); elsewhere every connection has a goroutine.
type loop struct{}

const loopsSupported = false

func (s *Server) startLoops() error { return errors.New("event loops need Linux") }
func (s *Server) adopt(*conn) bool  { return false }
func (l *loop) wakeUp()             {}

// writeNoWait is never called here: no connection is in a loop.
func (c *conn) writeNoWait() bool { return false }
