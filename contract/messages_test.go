package contract

import (
	"errors"
	"fmt"
	"strings"
	"testing"
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
