package lua

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// scriptArgs is one script's Args type and the text whose header comment
// documents its KEYS and ARGV.
type scriptArgs interface {
	KeysArgv() ([]string, []any)
}

var argsOfScripts = []struct {
	file string
	text string
	args scriptArgs // a pointer: the test fills it
}{
	{"claim.lua", claim, &ClaimArgs{}},
	{"renew.lua", renew, &RenewArgs{}},
	{"release.lua", release, &ReleaseArgs{}},
	{"counter.lua", counter, &CounterArgs{}},
	{"check.lua", Check, &CheckArgs{}},
	{"prune.lua", Prune, &PruneArgs{}},
	{"init.lua", initScript, &InitArgs{}},
}

// TestArgs_MatchHeaders: every field of a script's Args type lands at the
// ARGV index whose item in the script's header comment starts with the
// field's argv tag, every item is some field's, the tail ("24..") is the
// last field's, and the KEYS are the ones the header lists, in its order.
// Each field is filled with a value no other field has, so where it
// lands is found in the ARGV, not assumed.
func TestArgs_MatchHeaders(t *testing.T) {
	for _, sc := range argsOfScripts {
		t.Run(sc.file, func(t *testing.T) {
			h := header(sc.text)
			items, tail := headerArgv(t, h)
			v := reflect.ValueOf(sc.args).Elem()
			fillDistinct(v)
			keys, argv := sc.args.KeysArgv()
			if want := headerKeys(h); !slices.Equal(keys, want) {
				t.Errorf("KEYS %q, header lists %q", keys, want)
			}
			got := wireValues(t, argv)
			owner := make([]string, len(got)) // the field each ARGV value came from
			for i := 0; i < v.NumField(); i++ {
				f := v.Type().Field(i)
				tag, ok := f.Tag.Lookup("argv")
				if !ok {
					continue
				}
				want := expectedWire(v.Field(i), i == v.NumField()-1 && tail > 0)
				at := indexRun(got, want)
				if at < 0 {
					t.Errorf("%s: %q not in ARGV %q", f.Name, want, got)
					continue
				}
				for j := at; j < at+len(want); j++ {
					if owner[j] != "" {
						t.Errorf("ARGV[%d] is both %s and %s", j+1, owner[j], f.Name)
					}
					owner[j] = f.Name
				}
				if at >= len(items) {
					t.Errorf("%s lands at ARGV[%d]; the header lists %d items", f.Name, at+1, len(items))
					continue
				}
				if !strings.HasPrefix(items[at], tag) {
					t.Errorf("%s lands at ARGV[%d], which the header calls %q, not %q", f.Name, at+1, items[at], tag)
				}
				if len(want) > 1 && at+1 != tail {
					t.Errorf("%s is the tail from ARGV[%d]; the header's tail starts at %d", f.Name, at+1, tail)
				}
			}
			for j, o := range owner {
				if o == "" {
					t.Errorf("ARGV[%d] = %q comes from no field with an argv tag", j+1, got[j])
				}
			}
			if tail == 0 && len(got) != len(items) {
				t.Errorf("%d ARGV values, the header lists %d", len(got), len(items))
			}
		})
	}
}

// TestRenewArgs_Order pins one script's ARGV by hand, independently of
// the header parsing above.
func TestRenewArgs_Order(t *testing.T) {
	a := RenewArgs{Keys: NewKeys("f"), Token: "tok", Want: 30, Held: 20, LeaseTTLMs: 10000, EventsMaxLen: 500,
		Mode: "flake", Host: "h", PID: 7, Addr: "a:1", Version: "v1", Layout: "8/16/10ms/2025-01-01T00:00:00Z",
		Generation: "gen", Horizon: 401, EpochUs: 1735689600000000, TickUs: 10000, Node: "node",
		LossID: "loss", FleetHorizon: 402, MachineIDs: []int{4, 9}}
	keys, argv := a.KeysArgv()
	wantKeys := []string{"{f}:reserved", "{f}:events", "{f}:machines", "{f}:meta", "{f}:layout"}
	wantArgv := []any{"{f}:", "tok", int64(30), int64(20), int64(10000), int64(500), "flake", "h", 7, "a:1", "v1",
		"8/16/10ms/2025-01-01T00:00:00Z", "gen", int64(401), int64(1735689600000000), float64(10000), "node", "loss",
		int64(402), IdentityInfo, 4, 9}
	if !slices.Equal(keys, wantKeys) || !reflect.DeepEqual(argv, wantArgv) {
		t.Fatalf("KeysArgv() =\n%q\n%#v\nwant\n%q\n%#v", keys, argv, wantKeys, wantArgv)
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

// headerArgv splits the header's ARGV paragraph ("ARGV: 1 key prefix,
// 2 token, 3.. machine IDs.") into its items: items[i] is what it says
// of ARGV[i+1]. tail is the index of the "N.." item, 0 when there is
// none. Items are numbered in order, so ARGV[n+1]'s number is the first
// "n+1" after ARGV[n]'s that stands alone (not "1..2^24" or "-1").
func headerArgv(t *testing.T, h string) (items []string, tail int) {
	t.Helper()
	_, rest, ok := strings.Cut(h, "ARGV:")
	if !ok {
		t.Fatal("the header has no ARGV:")
	}
	rest, _, _ = strings.Cut(rest, "\n")
	type at struct{ num, text int }
	var starts []at
	for n := 1; ; n++ {
		from := 0
		if len(starts) > 0 {
			from = starts[len(starts)-1].text
		}
		re := regexp.MustCompile(`(?:^|[\s,;:(])(` + strconv.Itoa(n) + `)(\.\.)? `)
		m := re.FindStringSubmatchIndex(rest[from:])
		if m == nil {
			break
		}
		starts = append(starts, at{from + m[2], from + m[1]})
		if m[4] >= 0 {
			tail = n
			break
		}
	}
	if len(starts) == 0 {
		t.Fatalf("no numbered ARGV items in %q", rest)
	}
	for i, s := range starts {
		end := len(rest)
		if i+1 < len(starts) {
			end = starts[i+1].num
		}
		items = append(items, strings.TrimRight(strings.TrimSpace(rest[s.text:end]), ",;"))
	}
	return items, tail
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

// expectedWire is how field f must appear in ARGV: one value, or for the
// tail a run of values (a slice that is not the tail goes as one
// comma-separated value; Keys as its prefix).
func expectedWire(f reflect.Value, isTail bool) []string {
	switch x := f.Interface().(type) {
	case Keys:
		return []string{x.Prefix}
	case []int:
		s := make([]string, len(x))
		for i, n := range x {
			s[i] = strconv.Itoa(n)
		}
		if !isTail {
			return []string{strings.Join(s, ",")}
		}
		return s
	case []PruneID:
		var s []string
		for _, p := range x {
			s = append(s, strconv.Itoa(p.MachineID), p.Token)
		}
		return s
	case uint64:
		return []string{strconv.FormatUint(x, 10)}
	}
	return []string{fmt.Sprint(f.Interface())}
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

// indexRun is where run starts in s, -1 when it does not.
func indexRun(s, run []string) int {
	for i := 0; i+len(run) <= len(s); i++ {
		if slices.Equal(s[i:i+len(run)], run) {
			return i
		}
	}
	return -1
}
