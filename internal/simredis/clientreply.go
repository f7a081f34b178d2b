package simredis

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// setReply sets a reply (v, err as Server.Do returns them) on cmd the way
// go-redis's reader for cmd's type would have read it off the wire.
func setReply(cmd redis.Cmder, v any, err error) {
	if b, ok := cmd.(*redis.BoolCmd); ok && errors.Is(err, redis.Nil) {
		b.SetVal(false) // SET ... NX answers nil when it does not set: go-redis reads false
		return
	}
	if err != nil {
		cmd.SetErr(err)
		return
	}
	if err := setVal(cmd, v); err != nil {
		cmd.SetErr(err)
	}
}

// setVal converts v for cmd's type. The conversions are go-redis's
// readers' (proto.Reader.ReadString, ReadInt, ReadBool, ...).
func setVal(cmd redis.Cmder, v any) error {
	switch c := cmd.(type) {
	case *redis.Cmd:
		c.SetVal(v)
		return nil
	case *redis.StatusCmd:
		return setWith(c.SetVal, replyString, v)
	case *redis.StringCmd:
		return setWith(c.SetVal, replyString, v)
	case *redis.IntCmd:
		return setWith(c.SetVal, replyInt, v)
	case *redis.UintCmd:
		return setParsed(c.SetVal, v, func(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) })
	case *redis.BoolCmd:
		return setWith(c.SetVal, replyBool, v)
	case *redis.FloatCmd:
		return setParsed(c.SetVal, v, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) })
	case *redis.DurationCmd:
		n, err := replyInt(v)
		if err == nil {
			c.SetVal(duration(c.Name(), n))
		}
		return err
	case *redis.TimeCmd:
		return setWith(c.SetVal, replyTime, v)
	case *redis.SliceCmd:
		return setWith(c.SetVal, replyArray, v)
	case *redis.StringSliceCmd:
		return setWith(c.SetVal, replyStrings, v)
	case *redis.IntSliceCmd:
		return setEach(c.SetVal, replyInt, v)
	case *redis.BoolSliceCmd:
		return setEach(c.SetVal, replyBoolOrNil, v)
	case *redis.MapStringStringCmd:
		return setWith(c.SetVal, func(v any) (map[string]string, error) { return replyMap(v, replyString) }, v)
	case *redis.MapStringIntCmd:
		return setWith(c.SetVal, func(v any) (map[string]int64, error) { return replyMap(v, replyInt) }, v)
	case *redis.StringStructMapCmd:
		ss, err := replyStrings(v)
		if err == nil {
			c.SetVal(stringSet(ss))
		}
		return err
	case *redis.ScanCmd:
		page, cursor, err := replyScan(v)
		c.SetVal(page, cursor)
		return err
	case *redis.XMessageSliceCmd:
		return setEach(c.SetVal, replyXMessage, v)
	case *redis.XInfoStreamCmd:
		return setWith(c.SetVal, replyXInfoStream, v)
	case *redis.InfoCmd:
		return setParsed(c.SetVal, v, func(s string) (map[string]map[string]string, error) { return parseInfo(s), nil })
	}
	return fmt.Errorf("simredis: go-redis command type %T (%s) is not supported by the simulated client", cmd, cmd.Name())
}

// setWith sets conv(v) with set, also when conv fails (its zero or partial
// value then), and returns conv's error.
func setWith[T any](set func(T), conv func(any) (T, error), v any) error {
	x, err := conv(v)
	set(x)
	return err
}

// setEach is setWith for an array reply whose elements conv reads.
func setEach[T any](set func([]T), conv func(any) (T, error), v any) error {
	return setWith(set, func(v any) ([]T, error) { return eachOf(v, conv) }, v)
}

// setParsed reads v as a string and sets parse's value with set, also when
// parse fails; when v is not a string it sets nothing.
func setParsed[T any](set func(T), v any, parse func(string) (T, error)) error {
	s, err := replyString(v)
	if err != nil {
		return err
	}
	x, err := parse(s)
	set(x)
	return err
}

// replyBoolOrNil reads a BoolSliceCmd's element: nil is false.
func replyBoolOrNil(v any) (bool, error) {
	if v == nil {
		return false, nil
	}
	return replyBool(v)
}

// stringSet is ss as a set.
func stringSet(ss []string) map[string]struct{} {
	m := make(map[string]struct{}, len(ss))
	for _, s := range ss {
		m[s] = struct{}{}
	}
	return m
}

func replyString(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case error:
		return "", v
	}
	return "", fmt.Errorf("redis: can't parse reply %v (%T) reading string", v, v)
}

func replyInt(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	case error:
		return 0, v
	}
	return 0, fmt.Errorf("redis: can't parse int reply %v (%T)", v, v)
}

// replyBool is go-redis's ReadBool: "OK", "1" and "true" are true.
func replyBool(v any) (bool, error) {
	s, err := replyString(v)
	return s == "OK" || s == "1" || s == "true", err
}

func replyArray(v any) ([]any, error) {
	if a, ok := v.([]any); ok {
		return a, nil
	}
	if err, ok := v.(error); ok {
		return nil, err
	}
	return nil, fmt.Errorf("redis: can't parse array reply %v (%T)", v, v)
}

// eachOf converts every element of an array reply with conv.
func eachOf[T any](v any, conv func(any) (T, error)) ([]T, error) {
	a, err := replyArray(v)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(a))
	for i, x := range a {
		if out[i], err = conv(x); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// replyStrings reads a StringSliceCmd's reply: a nil element is "".
func replyStrings(v any) ([]string, error) {
	return eachOf(v, func(x any) (string, error) {
		if x == nil {
			return "", nil
		}
		return replyString(x)
	})
}

// replyMap reads a flat array of pairs.
func replyMap[T any](v any, conv func(any) (T, error)) (map[string]T, error) {
	a, err := replyArray(v)
	if err != nil {
		return nil, err
	}
	if len(a)%2 != 0 {
		return nil, fmt.Errorf("redis: got %d elements, want pairs", len(a))
	}
	m := make(map[string]T, len(a)/2)
	for i := 0; i < len(a); i += 2 {
		k, err := replyString(a[i])
		if err != nil {
			return nil, err
		}
		if m[k], err = conv(a[i+1]); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// duration reads PTTL's milliseconds and TTL's seconds; -1 and -2 (no
// expiry, no key) stay as they are, as go-redis leaves them.
func duration(name string, n int64) time.Duration {
	if n == -1 || n == -2 {
		return time.Duration(n)
	}
	if name == "pttl" {
		return time.Duration(n) * time.Millisecond
	}
	return time.Duration(n) * time.Second
}

func replyTime(v any) (time.Time, error) {
	a, err := replyArray(v)
	if err != nil {
		return time.Time{}, err
	}
	if len(a) != 2 {
		return time.Time{}, fmt.Errorf("redis: got %d elements in the array, wanted 2", len(a))
	}
	sec, err1 := replyInt(a[0])
	us, err2 := replyInt(a[1])
	if err := errors.Join(err1, err2); err != nil {
		return time.Time{}, err
	}
	return time.Unix(sec, us*1000), nil
}

func replyScan(v any) ([]string, uint64, error) {
	a, err := replyArray(v)
	if err != nil {
		return nil, 0, err
	}
	if len(a) != 2 {
		return nil, 0, fmt.Errorf("redis: got %d elements in the SCAN reply, wanted 2", len(a))
	}
	c, err := replyString(a[0])
	if err != nil {
		return nil, 0, err
	}
	cursor, err := strconv.ParseUint(c, 10, 64)
	if err != nil {
		return nil, 0, err
	}
	page, err := replyStrings(a[1])
	return page, cursor, err
}

// replyXMessage reads one stream entry, [id, [field, value, ...]]; the
// values are strings in a map[string]any, as go-redis gives them.
func replyXMessage(v any) (redis.XMessage, error) {
	if v == nil {
		return redis.XMessage{}, nil
	}
	a, err := replyArray(v)
	if err != nil {
		return redis.XMessage{}, err
	}
	if len(a) != 2 {
		return redis.XMessage{}, fmt.Errorf("redis: got %d elements in the XMessage array, expected 2", len(a))
	}
	id, err := replyString(a[0])
	if err != nil {
		return redis.XMessage{}, err
	}
	msg := redis.XMessage{ID: id}
	if a[1] == nil { // a deleted entry
		return msg, nil
	}
	fields, err := replyMap(a[1], replyString)
	if err != nil {
		return redis.XMessage{}, err
	}
	msg.Values = make(map[string]any, len(fields))
	for k, f := range fields {
		msg.Values[k] = f
	}
	return msg, nil
}

func replyXInfoStream(v any) (*redis.XInfoStream, error) {
	a, err := replyArray(v)
	if err != nil {
		return nil, err
	}
	info := &redis.XInfoStream{}
	for i := 0; i+1 < len(a); i += 2 {
		key, _ := replyString(a[i])
		val := a[i+1]
		switch key {
		case "length":
			info.Length, err = replyInt(val)
		case "radix-tree-keys":
			info.RadixTreeKeys, err = replyInt(val)
		case "radix-tree-nodes":
			info.RadixTreeNodes, err = replyInt(val)
		case "groups":
			info.Groups, err = replyInt(val)
		case "entries-added":
			info.EntriesAdded, err = replyInt(val)
		case "last-generated-id":
			info.LastGeneratedID, err = replyString(val)
		case "max-deleted-entry-id":
			info.MaxDeletedEntryID, err = replyString(val)
		case "recorded-first-entry-id":
			info.RecordedFirstEntryID, err = replyString(val)
		case "first-entry":
			info.FirstEntry, err = replyXMessage(val)
		case "last-entry":
			info.LastEntry, err = replyXMessage(val)
		}
		if err != nil {
			return nil, err
		}
	}
	return info, nil
}

// parseInfo reads INFO's text into sections, as go-redis's InfoCmd does.
func parseInfo(s string) map[string]map[string]string {
	out := map[string]map[string]string{}
	section := ""
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimRight(line, "\r")
		if name, ok := strings.CutPrefix(line, "#"); ok {
			section = strings.TrimPrefix(name, " ")
			out[section] = map[string]string{}
		} else if k, v, ok := strings.Cut(line, ":"); ok && out[section] != nil {
			out[section][k] = v
		}
	}
	return out
}
