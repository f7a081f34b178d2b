package contract

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flaked/flaked/scripts/lua"
)

// scriptArgs is one script's Args type; the script's header comment lists
// its KEYS and names the type.
type scriptArgs interface {
	KeysArgv() ([]string, []any)
}

// argsOfScripts: a script that starts with events.lua and guard.lua (text
// includes them) sends what they read too.
var argsOfScripts = []struct {
	file string
	text string
	args scriptArgs // a pointer: the test fills it
}{
	{"claim.lua", lua.Events + lua.Guard + lua.Claim, &ClaimArgs{}},
	{"renew.lua", lua.Events + lua.Guard + lua.Renew, &RenewArgs{}},
	{"release.lua", lua.Events + lua.Guard + lua.Release, &ReleaseArgs{}},
	{"counter.lua", lua.Events + lua.Guard + lua.Counter, &CounterArgs{}},
	{"check.lua", lua.Check, &CheckArgs{}},
	{"prune.lua", lua.Events + lua.Prune, &PruneArgs{}},
	{"mark.lua", lua.Events + lua.Mark, &MarkArgs{}},
	{"init.lua", lua.Events + lua.Guard + lua.Init, &InitArgs{}},
	{"seq.lua", lua.Events + lua.Guard + lua.Seq, &SeqArgs{}},
}

// readRE finds the ARGV names a script reads: A.name (args.lua's table).
var readRE = regexp.MustCompile(`\bA\.([A-Za-z]+)\b`)

// TestArgs_MatchScripts: a script's ARGV is name/value pairs, each name
// once; the names sent are exactly the ones the script reads, so the Go
// type (which documents each) is the whole of the script's ARGV; every
// field of the Args type with an arg tag is sent under that name (Keys as
// its prefix, lists comma-joined); the header names the Args type; and
// the KEYS are the ones the header lists, in its order. Each field is
// filled with a value no other field has, so the pair it lands in is
// found in the ARGV, not assumed.
func TestArgs_MatchScripts(t *testing.T) {
	for _, sc := range argsOfScripts {
		t.Run(sc.file, func(t *testing.T) {
			h := header(strings.TrimPrefix(strings.TrimPrefix(sc.text, lua.Events), lua.Guard))
			v := reflect.ValueOf(sc.args).Elem()
			if !strings.Contains(h, v.Type().Name()) {
				t.Errorf("the header does not name %s", v.Type().Name())
			}
			fillDistinct(v)
			keys, argv := sc.args.KeysArgv()
			if want := headerKeys(h); !slices.Equal(keys, want) {
				t.Errorf("KEYS %q, header lists %q", keys, want)
			}
			got := wireValues(t, argv)
			if len(got)%2 != 0 {
				t.Fatalf("ARGV %q is not name/value pairs", got)
			}
			sent := map[string]string{}
			var names []string
			for i := 0; i < len(got); i += 2 {
				if _, dup := sent[got[i]]; dup {
					t.Errorf("ARGV names %q twice", got[i])
				}
				sent[got[i]] = got[i+1]
				names = append(names, got[i])
			}
			var read []string
			for _, m := range readRE.FindAllStringSubmatch(sc.text, -1) {
				read = append(read, m[1])
			}
			slices.Sort(names)
			slices.Sort(read)
			if read = slices.Compact(read); !slices.Equal(names, read) {
				t.Errorf("ARGV sends %q, the script reads %q", names, read)
			}
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				name, ok := f.Tag.Lookup("arg")
				if !ok {
					continue
				}
				if w := expectedWire(v.Field(i)); sent[name] != w {
					t.Errorf("%s: ARGV %s = %q, want %q", f.Name, name, sent[name], w)
				}
			}
		})
	}
}

// TestRenewArgs_Order pins one script's ARGV by hand, independently of
// the reflection above.
func TestRenewArgs_Order(t *testing.T) {
	a := RenewArgs{Keys: NewKeys("f"), Token: "tok", Want: 30, Held: 20, LeaseTTLMs: 10000, EventsMaxLen: 500,
		Mode: "flake", Host: "h", PID: 7, Addr: "a:1", Version: "v1", Layout: "8/16/10ms/2025-01-01T00:00:00Z",
		Generation: "gen", Horizon: 401, EpochUs: 1735689600000000, TickUs: 10000, Node: "node",
		LossID: "loss", FleetHorizon: 402, MachineIDs: []int{4, 9}}
	keys, argv := a.KeysArgv()
	wantKeys := []string{"{f}:reserved", "{f}:events", "{f}:machines", "{f}:meta", "{f}:layout"}
	wantArgv := []any{"prefix", "{f}:", "token", "tok", "want", int64(30), "held", int64(20), "ttl", int64(10000),
		"maxlen", int64(500), "mode", "flake", "host", "h", "pid", 7, "addr", "a:1", "version", "v1",
		"layout", "8/16/10ms/2025-01-01T00:00:00Z", "generation", "gen", "horizon", int64(401),
		"epochUs", int64(1735689600000000), "tickUs", float64(10000), "node", "node", "lossID", "loss",
		"fleetHorizon", int64(402), "identity", IdentityInfo, "ids", "4,9"}
	if !slices.Equal(keys, wantKeys) || !reflect.DeepEqual(argv, wantArgv) {
		t.Fatalf("KeysArgv() =\n%q\n%#v\nwant\n%q\n%#v", keys, argv, wantKeys, wantArgv)
	}
}

// TestPruneArgs_Tokens: prune.lua reads each "id:token" item back as the
// pair it was; a token with a comma (never flaked's own) cannot match the
// stored one, so that ID is left alone rather than another one misread.
func TestPruneArgs_Tokens(t *testing.T) {
	_, argv := PruneArgs{Keys: NewKeys("f"), IDs: []PruneID{{4, "ab"}, {9, ""}, {12, "x,y"}}}.KeysArgv()
	if got := argv[len(argv)-1]; got != "4:ab,9:,12:xy" {
		t.Fatalf("ids = %q", got)
	}
}

// header is the leading comment block of a script, "--" and indentation
// stripped, lines joined by spaces; a comment line with nothing else
// ends a paragraph ("\n").
func header(script string) string {
	var b strings.Builder
	for _, line := range strings.Split(script, "\n") {
		if !strings.HasPrefix(line, "--") {
			break
		}
		text := strings.TrimSpace(strings.TrimPrefix(line, "--"))
		if text == "" {
			b.WriteString("\n")
			continue
		}
		b.WriteString(text + " ")
	}
	return b.String()
}

var keysRE = regexp.MustCompile(`KEYS\[(\d+)\],? (\{ns\}:\w+)`)

// headerKeys are the keys the header names KEYS[1], KEYS[2], ..., in the
// namespace "ns".
func headerKeys(h string) []string {
	var out []string
	for _, m := range keysRE.FindAllStringSubmatch(h, -1) {
		if n, _ := strconv.Atoi(m[1]); n != len(out)+1 {
			return append(out, "KEYS["+m[1]+"] out of order")
		}
		out = append(out, m[2])
	}
	return out
}

// fillDistinct sets every field of the Args struct v to a value no other
// field has: Keys to the namespace "ns" (the headers' own), numbers and
// strings from the field's index, slices to two elements.
func fillDistinct(v reflect.Value) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Struct:
			f.Set(reflect.ValueOf(NewKeys("ns")))
		case reflect.String:
			f.SetString(fmt.Sprintf("s%d", i))
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(1000 + i))
		case reflect.Uint64:
			f.SetUint(1<<62 + uint64(i))
		case reflect.Float64:
			f.SetFloat(float64(i) + 0.5)
		case reflect.Slice:
			switch f.Type().Elem() {
			case reflect.TypeOf(0):
				f.Set(reflect.ValueOf([]int{2000 + 10*i, 2001 + 10*i}))
			case reflect.TypeOf(PruneID{}):
				f.Set(reflect.ValueOf([]PruneID{{3000 + 10*i, fmt.Sprintf("t%d", i)}, {3001 + 10*i, ""}}))
			default:
				panic("no distinct value for " + f.Type().String())
			}
		default:
			panic("no distinct value for " + f.Type().String())
		}
	}
}

// expectedWire is how field f must appear in ARGV: Keys as its prefix,
// a list comma-joined, prune's IDs as "id:token" items.
func expectedWire(f reflect.Value) string {
	switch x := f.Interface().(type) {
	case Keys:
		return x.Prefix
	case []int:
		s := make([]string, len(x))
		for i, n := range x {
			s[i] = strconv.Itoa(n)
		}
		return strings.Join(s, ",")
	case []PruneID:
		var s []string
		for _, p := range x {
			s = append(s, strconv.Itoa(p.MachineID)+":"+p.Token)
		}
		return strings.Join(s, ",")
	case uint64:
		return strconv.FormatUint(x, 10)
	}
	return fmt.Sprint(f.Interface())
}

// wireValues are the ARGV values as Redis receives them. Only types that
// go-redis writes as the scripts read them are allowed (a time.Duration,
// say, would go as nanoseconds).
func wireValues(t *testing.T, argv []any) []string {
	t.Helper()
	out := make([]string, len(argv))
	for i, a := range argv {
		switch x := a.(type) {
		case string:
			out[i] = x
		case int:
			out[i] = strconv.Itoa(x)
		case int64:
			out[i] = strconv.FormatInt(x, 10)
		case float64:
			out[i] = strconv.FormatFloat(x, 'f', -1, 64)
		default:
			t.Errorf("ARGV[%d] is a %T", i+1, a)
		}
	}
	return out
}
