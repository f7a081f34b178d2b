package idtest

import "context"

// QuietRedis is a go-redis logger that drops every line. Tests that stop,
// pause or kill Redis on purpose install it in TestMain, with
// redis.SetLogger(idtest.QuietRedis{}), so the failed dials they cause do
// not bury the test's own output; the tests report failures themselves.
type QuietRedis struct{}

// Printf drops the line.
func (QuietRedis) Printf(context.Context, string, ...any) {}
