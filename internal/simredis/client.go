package simredis

import (
	"context"
	"encoding"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// NewClient returns a real go-redis client whose commands never touch the
// network: a hook turns each command's arguments into strings exactly as
// go-redis writes them on the wire, calls do, and sets the reply on the
// command with the setter of its type. do replies as Server.Do does; an
// error it returns that is not a reply (a simulated connection refused)
// is set on the command as is. Pipelines run their commands one by one;
// a MULTI/EXEC transaction (TxPipelined) runs its queued commands one by
// one and replies as EXEC would, atomically only as far as do is (a
// simulation calling from one goroutine).
//
// The client dials nothing and starts no goroutine (RESP2, no minimum of
// idle connections, no client-side cache or maintenance notifications);
// Close is harmless.
func NewClient(do func(ctx context.Context, args []string) (any, error)) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:     "127.0.0.1:6379", // never dialled; an IP, so go-redis resolves no name
		Protocol: 2,                // RESP3 would start client-side-cache machinery
		// A failure do reports is the simulation's verdict: retrying it
		// would only call do again with the same outcome.
		MaxRetries:      -1,
		DisableIdentity: true,
		PoolSize:        1,
	})
	c.AddHook(hook{do: do})
	return c
}

// Client returns a go-redis client of this server (NewClient calling Do).
func (s *Server) Client() *redis.Client {
	return NewClient(func(_ context.Context, args []string) (any, error) { return s.Do(args) })
}

// errDial is what a dial would return: the hook answers every command, so
// a dial means a code path this package does not know.
var errDial = errors.New("simredis: the client does not dial; every command goes through its hook")

// hook short-circuits go-redis: commands go to do, never to a connection.
type hook struct {
	do func(ctx context.Context, args []string) (any, error)
}

func (h hook) DialHook(redis.DialHook) redis.DialHook {
	return func(context.Context, string, string) (net.Conn, error) { return nil, errDial }
}

func (h hook) ProcessHook(redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.process(ctx, cmd)
		return cmd.Err()
	}
}

// Pipeline is one pipeline's connection as do sees it: go-redis sends a
// pipeline's commands on one connection, so they all reach the server the
// first one reached (a script and the read after it: internal/replwait),
// even when a failover moves where new commands go meanwhile. do pins the
// server in Server on the first command and sends the rest there. Cmds
// are the pipeline's commands (as do gets them) and Next the index of the
// one do is running: a simulation sends the request with the first and
// the replies after the last.
type Pipeline struct {
	Server any
	Cmds   [][]string
	Next   int
}

type pipelineKey struct{}

// PipelineOf is the pipeline the command do runs belongs to, or nil.
func PipelineOf(ctx context.Context) *Pipeline {
	p, _ := ctx.Value(pipelineKey{}).(*Pipeline)
	return p
}

func (h hook) ProcessPipelineHook(redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		pl := &Pipeline{}
		ctx = context.WithValue(ctx, pipelineKey{}, pl)
		tx := len(cmds) >= 2 && cmds[0].Name() == "multi" && cmds[len(cmds)-1].Name() == "exec"
		run := cmds
		if tx {
			run = cmds[1 : len(cmds)-1]
		}
		for _, cmd := range run {
			args, _ := wireArgs(cmd.Args())
			pl.Cmds = append(pl.Cmds, args)
		}
		if tx {
			h.transaction(ctx, pl, cmds)
		} else {
			for i, cmd := range cmds {
				pl.Next = i
				if !h.process(ctx, cmd) { // the connection failed: so did the rest
					setErr(cmds[i+1:], cmd.Err())
					break
				}
			}
		}
		for _, cmd := range cmds { // what go-redis returns: the first error, redis.Nil included
			if err := cmd.Err(); err != nil {
				return err
			}
		}
		return nil
	}
}

// process runs one command and sets its reply. It reports false when do
// failed without a reply (the error is set on cmd).
func (h hook) process(ctx context.Context, cmd redis.Cmder) bool {
	args, err := wireArgs(cmd.Args())
	if err != nil {
		cmd.SetErr(err)
		return true
	}
	if err := ctx.Err(); err != nil { // go-redis does not send on a done context
		cmd.SetErr(err)
		return false
	}
	v, err := h.do(ctx, args)
	if err != nil && !isReply(err) {
		cmd.SetErr(err)
		return false
	}
	setReply(cmd, v, err)
	return true
}

// transaction runs MULTI ... EXEC: the queued commands get their own
// replies (go-redis reads them out of EXEC's array and gives MULTI and
// EXEC to nobody).
func (h hook) transaction(ctx context.Context, pl *Pipeline, cmds []redis.Cmder) {
	for i, cmd := range cmds[1 : len(cmds)-1] {
		pl.Next = i
		if !h.process(ctx, cmd) {
			setErr(cmds, cmd.Err())
			return
		}
	}
	setReply(cmds[0], "OK", nil)
}

func setErr(cmds []redis.Cmder, err error) {
	for _, c := range cmds {
		c.SetErr(err)
	}
}

// isReply tells a reply (an error reply, redis.Nil) from a failure to get
// one.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// wireArgs converts arguments as go-redis's proto.Writer.WriteArg writes
// them.
func wireArgs(args []any) ([]string, error) {
	out := make([]string, len(args))
	for i, a := range args {
		s, err := wireArg(a)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

// wireArg follows go-redis v9's proto.Writer.WriteArg case by case: nil
// and nil pointers are "" or 0, bools 1 and 0, floats 'f' with the
// shortest precision, times RFC 3339 with nanoseconds, durations their
// nanoseconds, and anything else only through encoding.BinaryMarshaler.
func wireArg(v any) (string, error) {
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	utoa := func(n uint64) string { return strconv.FormatUint(n, 10) }
	ftoa := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case *string:
		return deref(v, ""), nil
	case []byte:
		return string(v), nil
	case int:
		return itoa(int64(v)), nil
	case *int:
		return itoa(int64(deref(v, 0))), nil
	case int8:
		return itoa(int64(v)), nil
	case *int8:
		return itoa(int64(deref(v, 0))), nil
	case int16:
		return itoa(int64(v)), nil
	case *int16:
		return itoa(int64(deref(v, 0))), nil
	case int32:
		return itoa(int64(v)), nil
	case *int32:
		return itoa(int64(deref(v, 0))), nil
	case int64:
		return itoa(v), nil
	case *int64:
		return itoa(deref(v, 0)), nil
	case uint:
		return utoa(uint64(v)), nil
	case *uint:
		return utoa(uint64(deref(v, 0))), nil
	case uint8:
		return utoa(uint64(v)), nil
	case *uint8:
		return utoa(uint64(deref(v, 0))), nil
	case uint16:
		return utoa(uint64(v)), nil
	case *uint16:
		return utoa(uint64(deref(v, 0))), nil
	case uint32:
		return utoa(uint64(v)), nil
	case *uint32:
		return utoa(uint64(deref(v, 0))), nil
	case uint64:
		return utoa(v), nil
	case *uint64:
		return utoa(deref(v, 0)), nil
	case float32:
		return ftoa(float64(v)), nil
	case *float32:
		return ftoa(float64(deref(v, 0))), nil
	case float64:
		return ftoa(v), nil
	case *float64:
		return ftoa(deref(v, 0)), nil
	case bool:
		return boolArg(v), nil
	case *bool:
		return boolArg(deref(v, false)), nil
	case time.Time:
		return v.Format(time.RFC3339Nano), nil
	case *time.Time:
		return deref(v, time.Time{}).Format(time.RFC3339Nano), nil
	case time.Duration:
		return itoa(v.Nanoseconds()), nil
	case *time.Duration:
		return itoa(deref(v, 0).Nanoseconds()), nil
	case encoding.BinaryMarshaler:
		b, err := v.MarshalBinary()
		if err != nil {
			return "", err
		}
		return string(b), nil
	case net.IP:
		return string(v), nil
	}
	return "", fmt.Errorf("redis: can't marshal %T (implement encoding.BinaryMarshaler)", v)
}

func deref[T any](p *T, zero T) T {
	if p == nil {
		return zero
	}
	return *p
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
