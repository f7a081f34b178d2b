package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/flaked/flaked/flake"
)

// TestMain clears FLAKED_* variables of the developer's shell, so only the
// tests' own settings reach the flags, and gives default state files a
// directory of their own.
func TestMain(m *testing.M) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "FLAKED_") {
			os.Unsetenv(k)
		}
	}
	// A serve without state flags keeps its default state file in a
	// directory of the run, never in the machine's /var/lib or $HOME.
	dir, err := os.MkdirTemp("", "flaked-cmd-state-")
	if err != nil {
		panic(err)
	}
	os.Setenv("STATE_DIRECTORY", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runT runs the app in-process with env set for the test's duration.
func runT(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var out, errb bytes.Buffer
	code = run(append([]string{"flaked"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// knownID is tick of 2026-02-03T04:05:06.070Z, sequence 17, machine 4242
// in the default layout.
func knownID(t *testing.T) (uint64, int64) {
	t.Helper()
	l := flake.DefaultLayout()
	tick := l.Tick(time.Date(2026, 2, 3, 4, 5, 6, 70_000_000, time.UTC))
	id, err := l.Compose(tick, 17, 4242)
	if err != nil {
		t.Fatal(err)
	}
	return id, tick
}

func TestParse_KnownID_PrintsEveryField(t *testing.T) {
	id, tick := knownID(t)
	want := "id:       " + flake.FormatID(id) + "\n" +
		"base32:   " + flake.FormatBase32(id) + "\n" +
		"time:     2026-02-03T04:05:06.070Z\n" +
		"tick:     " + flake.FormatID(uint64(tick)) + "\n" +
		"sequence: 17\n" +
		"machine:  4242\n" +
		"mode:     flake\n" +
		"js-safe:  false\n"
	for _, tc := range []struct {
		name string
		arg  string
	}{
		{"decimal", flake.FormatID(id)},
		{"base32", flake.FormatBase32(id)},
		{"base32 lower case", strings.ToLower(flake.FormatBase32(id))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runT(t, nil, "parse", tc.arg)
			if code != exitOK || out != want || errs != "" {
				t.Fatalf("exit %d, stdout:\n%s\nstderr: %q\nwant stdout:\n%s", code, out, errs, want)
			}
		})
	}
}

func TestParse_JSON_DecodesToEveryField(t *testing.T) {
	id, tick := knownID(t)
	code, out, errs := runT(t, nil, "parse", "--json", flake.FormatID(id))
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got parsed
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	want := parsed{ID: flake.FormatID(id), Base32: flake.FormatBase32(id), Time: "2026-02-03T04:05:06.070Z",
		Tick: tick, Sequence: 17, Machine: 4242, Mode: "flake"}
	if got != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestParse_CounterMachineID_ModeCounter(t *testing.T) {
	l := flake.DefaultLayout()
	for _, tc := range []struct {
		machine int
		mode    string
	}{
		{l.CounterMachineID(), "counter"},
		{l.MaxMachineID(), "flake"},
	} {
		id, err := l.Compose(1000, 1, tc.machine)
		if err != nil {
			t.Fatal(err)
		}
		code, out, _ := runT(t, nil, "parse", flake.FormatID(id))
		if code != exitOK || !strings.Contains(out, "mode:     "+tc.mode+"\n") {
			t.Errorf("machine %d: exit %d, want mode %s:\n%s", tc.machine, code, tc.mode, out)
		}
	}
}

func TestParse_LayoutFlagsAndEnv_Honoured(t *testing.T) {
	l, err := flake.NewLayout(12, 10, time.Millisecond, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	id, err := l.Compose(123456, 7, 9)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"FLAKED_BITS_SEQUENCE": "12",
		"FLAKED_BITS_MACHINE":  "5", // the flag below wins over the environment
		"FLAKED_TICK":          "1ms",
		"FLAKED_EPOCH":         "2024-01-01T00:00:00Z",
	}
	code, out, errs := runT(t, env, "parse", "--bits-machine", "10", flake.FormatID(id))
	for _, want := range []string{"time:     2024-01-01T00:02:03.456Z\n", "tick:     123456\n", "sequence: 7\n", "machine:  9\n"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("exit %d, stderr %q, stdout lacks %q:\n%s", code, errs, want, out)
		}
	}
	code, out, _ = runT(t, map[string]string{"FLAKED_JSON": "true"}, "parse", flake.FormatID(id))
	if code != exitOK || !strings.HasPrefix(out, "{") {
		t.Fatalf("FLAKED_JSON=true: exit %d, %q", code, out)
	}
}

func TestParse_BadInput_Exit2NamingRange(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string // in stderr
	}{
		{"text", nil, []string{"parse", "banana"}, "0..9223372036854775807 or 13 Crockford base32"},
		{"negative", nil, []string{"parse", "--", "-5"}, "0..9223372036854775807"},
		{"negative read as a flag", nil, []string{"parse", "-5"}, "-5"},
		{"2^63", nil, []string{"parse", "9223372036854775808"}, "0..9223372036854775807"},
		{"2^64", nil, []string{"parse", "18446744073709551616"}, "0..9223372036854775807"},
		{"empty", nil, []string{"parse", ""}, "0..9223372036854775807"},
		{"base32 over 2^63-1", nil, []string{"parse", "8ZZZZZZZZZZZZ"}, "above 2^63-1"},
		{"base32 bad character", nil, []string{"parse", "0000000000U00"}, "not a Crockford base32 character"},
		{"no ID", nil, []string{"parse"}, "want one ID, got 0"},
		{"two IDs", nil, []string{"parse", "1", "2"}, "want one ID, got 2"},
		{"bits-sequence 0", nil, []string{"parse", "--bits-sequence", "0", "1"}, "1..30"},
		{"bits-sequence 31", nil, []string{"parse", "--bits-sequence", "31", "1"}, "1..30"},
		{"bits-sequence -1", nil, []string{"parse", "--bits-sequence", "-1", "1"}, "1..30"},
		{"bits-sequence text", nil, []string{"parse", "--bits-sequence", "eight", "1"}, "1..30"},
		{"bits-machine 31", nil, []string{"parse", "--bits-machine", "31", "1"}, "1..30"},
		{"bits sum", nil, []string{"parse", "--bits-sequence", "20", "--bits-machine", "20", "1"}, "must be <= 31"},
		{"tick 500us", nil, []string{"parse", "--tick", "500us", "1"}, ">= 1ms"},
		{"tick 0", nil, []string{"parse", "--tick", "0", "1"}, ">= 1ms"},
		{"tick text", nil, []string{"parse", "--tick", "soon", "1"}, "tick"},
		{"epoch garbage", nil, []string{"parse", "--epoch", "yesterday", "1"}, "RFC 3339"},
		{"epoch future", nil, []string{"parse", "--epoch", "2999-01-01T00:00:00Z", "1"}, "future"},
		{"env bits-sequence 31", map[string]string{"FLAKED_BITS_SEQUENCE": "31"}, []string{"parse", "1"}, "FLAKED_BITS_SEQUENCE"},
		{"log-level", nil, []string{"parse", "--log-level", "loud", "1"}, "debug, info, warn or error"},
		{"log-format", nil, []string{"parse", "--log-format", "xml", "1"}, "json, console or auto"},
		{"unknown flag", nil, []string{"parse", "--no-such-flag", "1"}, "no-such-flag"},
		{"unknown command", nil, []string{"bogus"}, `unknown command "bogus"`},
		{"no command", nil, nil, "a command is needed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runT(t, tc.env, tc.args...)
			if code != exitUsage || !strings.Contains(errs, tc.want) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2, no stdout, stderr naming %q", code, out, errs, tc.want)
			}
		})
	}
}

func TestLog_DebugJSONToStderr_InfoSilent(t *testing.T) {
	code, _, errs := runT(t, nil, "parse", "--log-level", "debug", "--log-format", "json", "1")
	var line struct{ Level, Layout, Time string }
	if code != exitOK || json.Unmarshal([]byte(errs), &line) != nil {
		t.Fatalf("exit %d, stderr %q: want one JSON line", code, errs)
	}
	if line.Level != "debug" || line.Layout != flake.DefaultLayout().String() {
		t.Fatalf("log line %+v", line)
	}
	if _, err := time.Parse("2006-01-02T15:04:05.000Z07:00", line.Time); err != nil {
		t.Fatalf("time %q: want RFC 3339 with milliseconds", line.Time)
	}
	// auto is JSON when stderr is not a terminal; info hides debug lines.
	if code, _, errs := runT(t, nil, "parse", "1"); code != exitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q: want nothing logged", code, errs)
	}
	code, _, errs = runT(t, map[string]string{"FLAKED_LOG_LEVEL": "debug", "FLAKED_LOG_FORMAT": "console"}, "parse", "1")
	if code != exitOK || !strings.Contains(errs, "DBG parse") || strings.HasPrefix(errs, "{") {
		t.Fatalf("console: exit %d, stderr %q", code, errs)
	}
}

// A command added later gets the exit statuses from wire: its action's
// errors are failures (1) unless they are usage errors (2).
func TestWire_ActionErrors_Exit1UnlessUsage(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{errors.New("redis: connection refused"), exitFailure},
		{usagef("--listen: want host:port"), exitUsage},
	} {
		cmd := &cli.Command{Name: "serve", Action: func(*cli.Context) error { return tc.err }}
		wire(cmd, "", io.Discard)
		err := testApp(cmd).Run([]string{"flaked", "serve"})
		if got := exitStatus(err); got != tc.want || (err != nil && !strings.HasPrefix(err.Error(), "serve: ")) {
			t.Errorf("action error %v: exit %d, error %v; want exit %d, error prefixed with the command", tc.err, got, err, tc.want)
		}
	}
	// cli checks required flags before the action, outside OnUsageError.
	cmd := &cli.Command{Name: "serve", Action: func(*cli.Context) error { return nil },
		Flags: []cli.Flag{&cli.StringFlag{Name: "redis", Required: true}}}
	wire(cmd, "", io.Discard)
	if err := testApp(cmd).Run([]string{"flaked", "serve"}); exitStatus(err) != exitUsage {
		t.Errorf("missing required flag: error %v, exit %d; want %d", err, exitStatus(err), exitUsage)
	}
}

func testApp(cmds ...*cli.Command) *cli.App {
	return &cli.App{Commands: cmds, Writer: io.Discard, ErrWriter: io.Discard, ExitErrHandler: func(*cli.Context, error) {}}
}

func TestVersion_PrintsVersionAndGo(t *testing.T) {
	code, out, _ := runT(t, nil, "version")
	if code != exitOK || !strings.HasPrefix(out, "flaked "+version+" "+runtime.Version()) {
		t.Fatalf("exit %d: %q", code, out)
	}
}

func TestHelp_Exit0(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help", "parse"}, {"parse", "--help"}} {
		if code, out, _ := runT(t, nil, args...); code != exitOK || !strings.Contains(out, "flaked") {
			t.Errorf("%v: exit %d: %q", args, code, out)
		}
	}
}

// Every flag of every command has one environment variable: FLAKED_<NAME>,
// or FLAKED_<COMMAND>_<NAME> for a flag whose name means something else
// on another command.
func TestFlags_EveryFlagHasEnvVar(t *testing.T) {
	for _, f := range allFlags() {
		env := envName(f.flag.Names()[0])
		if len(f.env) != 1 || (f.env[0] != env && f.env[0] != envName(f.cmd[0]+"-"+f.flag.Names()[0])) {
			t.Errorf("%s --%s: env vars %v; want %s or FLAKED_%s_...", strings.Join(f.cmd, " "), f.flag.Names()[0], f.env, env, strings.ToUpper(f.cmd[0]))
		}
	}
}

// An environment variable means one thing: flags of several commands
// that share one have the same name, type and default. Fault covered: a
// variable set for one command (seq create's --rate) silently changing
// another (plan's --rate), or a container's FLAKED_URL meant for a client
// steering the health check.
func TestFlags_EnvVarsMeanOneThing(t *testing.T) {
	first := map[string]cmdFlag{}
	for _, f := range allFlags() {
		for _, env := range f.env {
			o, seen := first[env]
			if !seen {
				first[env] = f
				continue
			}
			if o.flag.Names()[0] != f.flag.Names()[0] || fmt.Sprintf("%T", o.flag) != fmt.Sprintf("%T", f.flag) || o.value != f.value {
				t.Errorf("%s is --%s (%T, default %q) of %q and --%s (%T, default %q) of %q; give one of them FLAKED_<COMMAND>_<NAME>",
					env, o.flag.Names()[0], o.flag, o.value, strings.Join(o.cmd, " "), f.flag.Names()[0], f.flag, f.value, strings.Join(f.cmd, " "))
			}
		}
	}
}

type cmdFlag struct {
	cmd   []string // the command's path: seq, create
	flag  cli.Flag
	env   []string
	value string // the default, as help prints it
}

func envName(flag string) string {
	return "FLAKED_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// allFlags are the flags of every command and subcommand of the app.
func allFlags() []cmdFlag {
	var out []cmdFlag
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			p := append(slices.Clone(path), cmd.Name)
			for _, f := range cmd.Flags {
				cf := cmdFlag{cmd: p, flag: f}
				if df, ok := f.(cli.DocGenerationFlag); ok {
					cf.env, cf.value = df.GetEnvVars(), df.GetValue()
				}
				out = append(out, cf)
			}
			walk(p, cmd.Subcommands)
		}
	}
	walk(nil, newApp(&bytes.Buffer{}, &bytes.Buffer{}).Commands)
	return out
}
