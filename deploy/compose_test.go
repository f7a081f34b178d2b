package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/flaked/flaked/internal/redistest"
)

// composeFile is the part of the Compose file format these tests read
// (not strict: Compose has far more fields than the ones checked).
type composeFile struct {
	Services map[string]composeService `json:"services"`
	Volumes  map[string]any            `json:"volumes"`
}

type composeService struct {
	Image       string `json:"image"`
	Build       any    `json:"build"`
	Command     any    `json:"command"`     // a string or a list
	Environment any    `json:"environment"` // a map or a list of K=V
	Healthcheck *struct {
		Test []string `json:"test"`
	} `json:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `json:"condition"`
	} `json:"depends_on"`
	Restart         string   `json:"restart"`
	StopGracePeriod string   `json:"stop_grace_period"`
	StopSignal      string   `json:"stop_signal"`
	Ports           []string `json:"ports"`
	Volumes         []string `json:"volumes"`
}

// env is the service's environment as a map, from either form.
func (s composeService) env(t *testing.T) map[string]string {
	t.Helper()
	env := map[string]string{}
	switch e := s.Environment.(type) {
	case nil:
	case map[string]any:
		for k, v := range e {
			env[k] = fmt.Sprint(v)
		}
	case []any:
		for _, kv := range e {
			k, v, _ := strings.Cut(fmt.Sprint(kv), "=")
			env[k] = v
		}
	default:
		t.Fatalf("environment %T: not read by this test", e)
	}
	return env
}

// The compose file's flaked services run flaked serve with real
// environment variables and valid values (the built daemon starts with the
// image's ENV and theirs, and becomes ready), their health check command
// passes against it, they stop within stop_grace_period, publish the
// daemon's ports on loopback only and keep their state file on a volume of
// their own. The Dockerfile's HEALTHCHECK is run the same way.
func TestCompose_ServicesRunTheDaemon(t *testing.T) {
	cf := readCompose(t)
	flags := serveFlags(t)
	checkDockerfileStopSignal(t)
	imageEnv := dockerfileEnv(t)
	stateVolumes := map[string]string{}
	names, _ := cf.flakedServices(t)
	if len(names) < 2 {
		t.Fatalf("docker-compose.yml: flaked services %v; want a fleet (read through the <<: merge key)", names)
	}
	for _, name := range names {
		s := cf.Services[name]
		t.Run(name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range imageEnv {
				env[k] = v
			}
			svcEnv := s.env(t)
			for k, v := range svcEnv {
				env[k] = v
			}
			checkEnvNames(t, flags, svcEnv)
			args := s.command(t) // nil: the image's CMD, serve
			if args != nil {
				if args[0] != "serve" {
					t.Fatalf("command %q: want serve and its flags", args)
				}
				args = args[1:]
			}
			cfg := serveConfig{args: args, env: env}

			// The Redis URL names a service of this file.
			if u := env["FLAKED_REDIS"]; u != "" {
				checkRedisURL(t, "FLAKED_REDIS", u)
				if pu, err := url.Parse(u); err != nil || cf.Services[pu.Hostname()].Image == "" {
					t.Errorf("FLAKED_REDIS %s: no service %q in the file", u, pu.Hostname())
				}
			}
			if s.StopSignal != "" && s.StopSignal != "SIGTERM" && s.StopSignal != "SIGINT" {
				t.Errorf("stop_signal %s: flaked stops gracefully on SIGTERM or SIGINT", s.StopSignal)
			}
			grace := 10 * time.Second // Compose's default
			if s.StopGracePeriod != "" {
				var err error
				if grace, err = time.ParseDuration(s.StopGracePeriod); err != nil {
					t.Fatalf("stop_grace_period %q: %v", s.StopGracePeriod, err)
				}
			}
			checkStopTime(t, flags, cfg, "stop_grace_period", grace)

			listen, metrics := effective(t, flags, cfg, "listen"), effective(t, flags, cfg, "metrics-addr")
			if metrics == "" {
				t.Fatal("no metrics address: no /readyz for the health check")
			}
			for _, p := range s.Ports {
				parts := strings.Split(p, ":")
				if len(parts) != 3 || net.ParseIP(parts[0]) == nil || !net.ParseIP(parts[0]).IsLoopback() {
					t.Errorf("port %q: publish on the host's loopback only (127.0.0.1:host:container)", p)
					continue
				}
				if c := parts[2]; c != port(t, listen) && c != port(t, metrics) {
					t.Errorf("port %q: the daemon listens on neither %s nor %s", p, listen, metrics)
				}
			}
			stateFile := effective(t, flags, cfg, "state-file")
			onVolume := false
			for _, v := range s.Volumes {
				vol, mount, _ := strings.Cut(v, ":")
				mount, _, _ = strings.Cut(mount, ":")
				if strings.HasPrefix(stateFile, strings.TrimSuffix(mount, "/")+"/") {
					onVolume = true
					if other, dup := stateVolumes[vol]; dup {
						t.Errorf("volume %s holds the state file of %s too: each node needs its own", vol, other)
					}
					stateVolumes[vol] = name
				}
			}
			if stateFile == "" || !onVolume || path.Dir(stateFile) == "/" {
				t.Errorf("state file %q: not in a directory of a volume of its own", stateFile)
			}
			if t.Failed() {
				t.FailNow()
			}

			r := startServe(t, flags, cfg)
			if s.Healthcheck == nil {
				t.Fatal("no healthcheck")
			}
			runHealthcheck(t, "healthcheck", s.Healthcheck.Test, metrics, r)
			runHealthcheck(t, "Dockerfile HEALTHCHECK", dockerfileHealthcheck(t), metrics, r)
		})
	}
}

// readCompose decodes ../docker-compose.yml (anchors and <<: merges
// resolved).
func readCompose(t *testing.T) composeFile {
	t.Helper()
	js, err := yaml.YAMLToJSON(readFile(t, "../docker-compose.yml"))
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	var cf composeFile
	if err := json.Unmarshal(js, &cf); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return cf
}

// command is the service's command as a list (nil: the image's CMD).
func (s composeService) command(t *testing.T) []string {
	t.Helper()
	var args []string
	switch c := s.Command.(type) {
	case nil:
	case []any:
		for _, a := range c {
			args = append(args, fmt.Sprint(a))
		}
	default:
		t.Fatalf("command %v: write it as a list", c)
	}
	return args
}

// flakedServices are the names of the services running the flaked image:
// the nodes (flaked serve), sorted, and the flaked init ones.
func (cf composeFile) flakedServices(t *testing.T) (nodes, inits []string) {
	t.Helper()
	for name, s := range cf.Services {
		if s.Build == nil && !strings.HasPrefix(s.Image, "flaked") {
			continue
		}
		if args := s.command(t); len(args) > 0 && args[0] == "init" {
			inits = append(inits, name)
		} else {
			nodes = append(nodes, name)
		}
	}
	slices.Sort(nodes)
	return nodes, inits
}

// The compose file makes the fleet's registry before its nodes start: one
// service runs flaked init --if-missing once (restart "no") after Redis is
// healthy, every node waits for it to complete, and it reads the nodes'
// own values of every setting it has (the Redis URL, namespace, layout,
// lead and skew: one place, the nodes' environment). Run for real on a
// redis-server with that command and environment, it makes the registry,
// and a second run (the next "docker compose up") does nothing, status 0.
func TestCompose_InitServiceBeforeTheNodes(t *testing.T) {
	cf := readCompose(t)
	nodes, inits := cf.flakedServices(t)
	if len(inits) != 1 {
		t.Fatalf("docker-compose.yml: flaked init services %v; want one", inits)
	}
	name := inits[0]
	s := cf.Services[name]
	args := s.command(t)
	if !slices.Contains(args, "--if-missing") {
		t.Errorf("%s: command %q: without --if-missing the next \"up\" fails (the registry exists) and no node starts", name, args)
	}
	if s.Restart != "no" && s.Restart != "on-failure" {
		t.Errorf("%s: restart %q: a one-shot service (\"no\" or on-failure)", name, s.Restart)
	}
	initFlags, _ := commandFlags(t, "init")
	env := s.env(t)
	for _, n := range nodes {
		ns := cf.Services[n]
		if c := ns.DependsOn[name].Condition; c != "service_completed_successfully" {
			t.Errorf("%s: depends_on %s condition %q: want service_completed_successfully (no node before the registry)", n, name, c)
		}
		nodeEnv := ns.env(t)
		for _, f := range initFlags {
			if f.env != "" && f.name != "if-missing" && !strings.HasPrefix(f.name, "log-") && env[f.env] != nodeEnv[f.env] {
				t.Errorf("%s: %s=%q, but node %s has %q: init must make the nodes' registry", name, f.env, env[f.env], n, nodeEnv[f.env])
			}
		}
	}
	redisURL := env["FLAKED_REDIS"]
	checkRedisURL(t, "FLAKED_REDIS", redisURL)
	if pu, err := url.Parse(redisURL); err != nil || cf.Services[pu.Hostname()].Image == "" {
		t.Errorf("FLAKED_REDIS %s: no service %q in the file", redisURL, pu.Hostname())
	} else if c := s.DependsOn[pu.Hostname()].Condition; c != "service_healthy" {
		t.Errorf("%s: depends_on %s condition %q: want service_healthy", name, pu.Hostname(), c)
	}
	if t.Failed() {
		t.FailNow()
	}
	runInitTwice(t, name+" (the next up)", args, env)
}

// runInitTwice runs a deploy file's init step (the built binary with
// args, the image's environment and env, FLAKED_REDIS pointed at a new
// redis-server) twice, as every start does: the first makes the
// registry, the second finds it and does nothing.
func runInitTwice(t *testing.T, name string, args []string, env map[string]string) {
	t.Helper()
	redistest.Require(t)
	srv := redistest.Start(t, redistest.Options{})
	run := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, flakedBin, args...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "FLAKED_REDIS=" + srv.URL()}
		for k, v := range dockerfileEnv(t) {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		for k, v := range env {
			if k != "FLAKED_REDIS" {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: flaked %q: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	if out := run(); !strings.Contains(out, "made") {
		t.Fatalf("%s on an empty Redis: %s", name, out)
	}
	if out := run(); !strings.Contains(out, "nothing done") {
		t.Fatalf("%s, run again: %s", name, out)
	}
}

// runHealthcheck runs a container health check, ["CMD", "/path/flaked",
// "healthcheck", "--url", URL], with the built binary and URL's address
// moved to where r listens. The URL's port must be the daemon's metrics
// port.
func runHealthcheck(t *testing.T, what string, test []string, metricsAddr string, r *running) {
	t.Helper()
	if len(test) < 3 || test[0] != "CMD" || path.Base(test[1]) != "flaked" || test[2] != "healthcheck" {
		t.Fatalf("%s %q: want [CMD /usr/local/bin/flaked healthcheck ...] (distroless has no shell or curl)", what, test)
	}
	args := slices.Clone(test[2:])
	for i, a := range args {
		u, err := url.Parse(a)
		if err != nil || u.Scheme != "http" {
			continue
		}
		if u.Port() != port(t, metricsAddr) {
			t.Errorf("%s: %s: the daemon's HTTP side is on port %s", what, a, port(t, metricsAddr))
		}
		if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" {
			t.Errorf("%s: %s: a container checks itself on loopback", what, a)
		}
		u.Host = r.metricsAddr
		args[i] = u.String()
	}
	out, err := exec.Command(flakedBin, args...).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ready") {
		t.Errorf("%s %q against the running daemon: %v: %s", what, args, err, out)
	}
}

// dockerfileHealthcheck is the exec form of the Dockerfile's HEALTHCHECK.
func dockerfileHealthcheck(t *testing.T) []string {
	t.Helper()
	text := strings.ReplaceAll(string(readFile(t, "../Dockerfile")), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "HEALTHCHECK ") {
			continue
		}
		_, cmd, ok := strings.Cut(line, " CMD ")
		var test []string
		if !ok || json.Unmarshal([]byte(strings.TrimSpace(cmd)), &test) != nil {
			t.Fatalf("Dockerfile %q: want HEALTHCHECK ... CMD [exec form]", line)
		}
		return append([]string{"CMD"}, test...)
	}
	t.Fatal("Dockerfile: no HEALTHCHECK")
	return nil
}
