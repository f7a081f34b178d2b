package contract

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/flaked/flaked/internal/simredis"
)

// redisErr stands for go-redis's error reply type.
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

// TestExplain_Refusals: each of guard.lua's refusal codes comes out as its
// text, naming the fix, and still reads as a refusal of its check.
func TestExplain_Refusals(t *testing.T) {
	for _, c := range []struct {
		reply, check string
		words        []string
	}{
		{"UNSAFE identity: info-unknown ERR unknown command 'INFO'", UnsafeIdentity,
			[]string{"unknown command 'INFO'", "rename-command INFO", "--redis-identity=none"}},
		{"UNSAFE identity: info-denied NOPERM this user has no permissions", UnsafeIdentity,
			[]string{"NOPERM", "+info", "deploy/redis/acl.conf", "--redis-identity=none"}},
		{"UNSAFE identity: no-field master_replid", UnsafeIdentity, []string{"INFO shows no master_replid", "proxy"}},
		{"UNSAFE eviction: allkeys allkeys-lru", UnsafeEviction, []string{"maxmemory-policy allkeys-lru", "noeviction"}},
		{"UNSAFE eviction: no-policy ", UnsafeEviction, []string{"no maxmemory_policy", "--redis-identity=none"}},
	} {
		err := Explain(fmt.Errorf("%w", redisErr(c.reply)))
		for _, w := range c.words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q explained as %q: no %q", c.reply, err, w)
			}
		}
		if check, ok := UnsafeCheck(fmt.Errorf("claim: %w", err)); !ok || check != c.check {
			t.Errorf("%q explained: UnsafeCheck = %q, %v; want %q", c.reply, check, ok, c.check)
		}
	}
	other := errors.New("dial tcp: refused")
	if Explain(other) != other || Explain(nil) != nil {
		t.Error("Explain changed an error that is not a refusal")
	}
}

// TestMessages_KeepOldText: a value written by an older version (a whole
// text instead of a code) is shown as it is.
func TestMessages_KeepOldText(t *testing.T) {
	old := "Redis lost writes (loss x): the rate bound puts tag t up to 9 values above its copy (1)"
	if SeqBlockedText("t", old) != old || DataLossText("some text") != "some text" || RenewFailReason("expired") != "expired" {
		t.Error("an old text was rewritten")
	}
	if got := SeqBlockedText("t", "jump l@1 9 1 5"); !strings.Contains(got, "max jump 5") || !strings.Contains(got, "flaked seq restore t --above N") {
		t.Errorf("blocked text %q", got)
	}
}

// TestScriptError_EveryServer: a script's failure (guard.lua's fail)
// reaches Go with its code and text from every server the scripts run on:
// miniredis (unit tests), internal/simredis (the simulator) and
// redis-server, whose replies are pinned here as 7.0 words them (coord's
// and node's tests get them from a real one). A refusal must read as one
// wherever it comes from, or a node would not say why it stopped.
func TestScriptError_EveryServer(t *testing.T) {
	cases := []struct{ code, text string }{
		{codeUnsafe, "identity: info-denied NOPERM this user has no permissions"},
		{codeNoRegistry, "{f}:meta"},
		{codeInvalid, "counter.lua: min value x y is not a counter value"},
	}
	mr := miniredis.RunT(t)
	servers := map[string]*redis.Client{
		"miniredis": redis.NewClient(&redis.Options{Addr: mr.Addr()}),
		"simredis":  simredis.New(nil, nil).Client(),
	}
	for name, c := range servers {
		for _, tc := range cases {
			script := guard + "\nfail('" + tc.code + "', '" + tc.text + "')\n"
			err := c.Eval(context.Background(), script, nil).Err()
			if code, text, ok := scriptErrorOf(err); !ok || code != tc.code || text != tc.text {
				t.Errorf("%s: %v read as %q %q %v; want %q %q", name, err, code, text, ok, tc.code, tc.text)
			}
		}
		c.Close()
	}
	for i, reply := range []string{ // in the order of cases
		"ERR UNSAFE identity: info-denied NOPERM this user has no permissions script: c10e26264cd1846f60adacc005c052a1655717d3, on @user_script:41.",
		"ERR NOREGISTRY {f}:meta script: 9d82229bd0517c229b24d7afafe4c43c4d38300b, on @user_script:95.",
		"ERR INVALID counter.lua: min value x y is not a counter value script: ec5e7ffb6192e268e2a4db918180a420ebcd2857, on @user_script:160.",
	} {
		if code, text, ok := scriptError(reply); !ok || code != cases[i].code || text != cases[i].text {
			t.Errorf("redis-server's %q read as %q %q %v", reply, code, text, ok)
		}
	}
	if _, _, ok := scriptError("ERR user_script:12: WRONGTYPE Operation against a key holding the wrong kind of value script: 1"); ok {
		t.Error("a failing redis.call read as a script's own failure")
	}
	noReg := redisErr("ERR NOREGISTRY {f}:meta script: 9d8, on @user_script:95.")
	if err := Explain(noReg); !errors.Is(err, ErrNoRegistry) || !strings.Contains(err.Error(), "{f}:meta is missing") {
		t.Errorf("NOREGISTRY explained as %v", err)
	}
	unsafe := redisErr("ERR UNSAFE eviction: allkeys allkeys-lru script: c10, on @user_script:41.")
	if err := Explain(unsafe); !strings.HasSuffix(err.Error(), "(CONFIG SET maxmemory-policy noeviction, and in redis.conf)") {
		t.Errorf("UNSAFE explained as %q: the server's wrapping is left in it", err)
	}
}
