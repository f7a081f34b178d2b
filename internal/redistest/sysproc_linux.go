//go:build linux

package redistest

import "syscall"

// sysProcAttr makes the kernel kill a child when the test binary dies
// without running its cleanups (for example on a `go test -timeout` panic),
// so that no redis process outlives the test run.
//
// Pdeathsig fires when the OS thread that started the child exits. The Go
// runtime only ends a thread when a goroutine locked to it
// (runtime.LockOSThread) returns, which tests do not do.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
