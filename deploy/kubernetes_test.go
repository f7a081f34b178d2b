package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// manifests are the objects of deploy/kubernetes/, decoded strictly.
type manifests struct {
	sts      []*appsv1.StatefulSet
	services []*corev1.Service
	pdbs     []*policyv1.PodDisruptionBudget
	secrets  []*corev1.Secret
	files    map[string][]string // file -> kind/name of its objects
}

// kustomization is the part of kustomize's Kustomization these manifests
// use; strict decoding refuses any other field, so a field added to
// kustomization.yaml must be added here (and checked) too.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
	} `json:"images,omitempty"`
}

// loadManifests decodes every document of every .yaml file in dir into its
// Kubernetes API type, strictly: an unknown or duplicate field, a value of
// the wrong type or a kind this test does not know fails.
func loadManifests(t *testing.T, dir string) manifests {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	m := manifests{files: map[string][]string{}}
	for _, p := range paths {
		if filepath.Base(p) == "kustomization.yaml" {
			continue
		}
		for i, doc := range splitYAML(readFile(t, p)) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s document %d: %v", p, i, err)
			}
			var obj interface{ GetName() string }
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 StatefulSet":
				o := &appsv1.StatefulSet{}
				m.sts, obj = append(m.sts, o), o
			case "v1 Service":
				o := &corev1.Service{}
				m.services, obj = append(m.services, o), o
			case "policy/v1 PodDisruptionBudget":
				o := &policyv1.PodDisruptionBudget{}
				m.pdbs, obj = append(m.pdbs, o), o
			case "v1 Secret":
				o := &corev1.Secret{}
				m.secrets, obj = append(m.secrets, o), o
			default:
				t.Fatalf("%s document %d: kind %q of %q: not one this test decodes; add it", p, i, tm.Kind, tm.APIVersion)
			}
			if err := yaml.UnmarshalStrict(doc, obj); err != nil {
				t.Fatalf("%s document %d (%s): %v", p, i, tm.Kind, err)
			}
			if obj.GetName() == "" {
				t.Errorf("%s document %d (%s): no metadata.name", p, i, tm.Kind)
			}
			m.files[filepath.Base(p)] = append(m.files[filepath.Base(p)], tm.Kind+"/"+obj.GetName())
		}
	}
	return m
}

// splitYAML splits a multi-document YAML file at its "---" lines, dropping
// documents that hold only comments.
func splitYAML(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(append([]byte("\n"), b...), []byte("\n---")) {
		empty := true
		for _, line := range strings.Split(string(d), "\n") {
			if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
				empty = false
			}
		}
		if !empty {
			docs = append(docs, d)
		}
	}
	return docs
}

func TestKubernetes_ManifestsDecodeStrictly(t *testing.T) {
	m := loadManifests(t, "kubernetes")
	if len(m.sts) != 1 || len(m.pdbs) != 1 || len(m.services) == 0 || len(m.secrets) != 1 {
		t.Fatalf("want 1 StatefulSet, 1 PodDisruptionBudget, Services and 1 example Secret; have %v", m.files)
	}
}

// The strict decoding has teeth: a misspelt field fails it.
func TestKubernetes_StrictDecodingRefusesUnknownField(t *testing.T) {
	doc := strings.Replace(string(readFile(t, "kubernetes/statefulset.yaml")),
		"terminationGracePeriodSeconds:", "terminationGracePeriodSecond:", 1)
	if err := yaml.UnmarshalStrict([]byte(doc), &appsv1.StatefulSet{}); err == nil || !strings.Contains(err.Error(), "terminationGracePeriodSecond") {
		t.Fatalf("a misspelt field decoded: %v", err)
	}
}

// The StatefulSet's container runs flaked serve with real flags and valid
// values (the daemon starts with them and becomes ready), probes the
// daemon's health endpoints on its --metrics-addr port, stops within its
// grace period, takes its secrets from keys the Secret has, and keeps its
// state file on its own volume.
func TestKubernetes_StatefulSetRunsTheDaemon(t *testing.T) {
	m := loadManifests(t, "kubernetes")
	if len(m.sts) != 1 {
		t.Fatalf("want one StatefulSet, have %d", len(m.sts))
	}
	sts := m.sts[0]
	pod := sts.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, have %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	flags := serveFlags(t)

	// The image's entrypoint is flaked; the arguments start with serve.
	if len(c.Command) != 0 {
		t.Errorf("command %q: leave it to the image's entrypoint (flaked)", c.Command)
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Fatalf("args %q: want serve and its flags", c.Args)
	}
	checkDockerfileStopSignal(t)
	env := dockerfileEnv(t)
	secretEnv := map[string]string{} // env var -> the Secret's value
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			if strings.Contains(e.Value, "$(") {
				t.Errorf("env %s=%q: this test does not expand $(VAR)", e.Name, e.Value)
			}
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := secretValue(m.secrets, ref.Name, ref.Key)
			if !ok {
				t.Errorf("env %s: Secret %q has no key %q (secret.example.yaml)", e.Name, ref.Name, ref.Key)
				continue
			}
			if ref.Optional != nil && *ref.Optional {
				t.Errorf("env %s: an optional secret would start the pod without it", e.Name)
			}
			secretEnv[e.Name], env[e.Name] = v, v
		case e.ValueFrom.ResourceFieldRef != nil:
			if strings.HasPrefix(e.Name, "FLAKED_") {
				t.Errorf("env %s: a resource field is no flag value", e.Name)
			}
			if r := e.ValueFrom.ResourceFieldRef.Resource; r == "limits.memory" && c.Resources.Limits.Memory().IsZero() {
				t.Errorf("env %s from %s: the container has no memory limit", e.Name, r)
			}
		default:
			t.Errorf("env %s: valueFrom this test does not check", e.Name)
		}
	}
	for _, k := range []string{"FLAKED_REDIS", "FLAKED_REQUIREPASS"} {
		if _, ok := secretEnv[k]; !ok {
			t.Errorf("%s: not from the Secret", k)
		}
	}
	checkEnvNames(t, flags, env)
	cfg := serveConfig{args: c.Args[1:], env: env}
	checkLayoutExplicit(t, flags, cfg)
	vals := parseArgs(t, flags, cfg.args)
	if _, ok := vals["redis"]; ok {
		t.Errorf("--redis in args: its URL holds a password; take it from the Secret (FLAKED_REDIS)")
	}
	if _, ok := vals["requirepass"]; ok {
		t.Errorf("--requirepass in args: take it from the Secret (FLAKED_REQUIREPASS)")
	}

	// Ports: the container's named ports are the daemon's.
	listen, metrics := effective(t, flags, cfg, "listen"), effective(t, flags, cfg, "metrics-addr")
	if metrics == "" {
		t.Fatal("no --metrics-addr: no /healthz or /readyz to probe")
	}
	for _, a := range []string{listen, metrics} {
		if h, _, _ := strings.Cut(a, ":"); h == "127.0.0.1" || h == "localhost" {
			t.Errorf("address %s: loopback inside the pod is out of the Service's and kubelet's reach", a)
		}
	}
	containerPort := func(p intstr.IntOrString) string {
		if p.Type == intstr.Int {
			return strconv.Itoa(int(p.IntVal))
		}
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				return strconv.Itoa(int(cp.ContainerPort))
			}
		}
		t.Errorf("port %q: the container has no port of that name", p.StrVal)
		return ""
	}
	wantPorts := map[string]string{port(t, listen): "--listen", port(t, metrics): "--metrics-addr"}
	for _, cp := range c.Ports {
		if _, ok := wantPorts[strconv.Itoa(int(cp.ContainerPort))]; !ok {
			t.Errorf("container port %s/%d: the daemon listens on neither --listen %s nor --metrics-addr %s", cp.Name, cp.ContainerPort, listen, metrics)
		}
	}

	// Probes: HTTP on the metrics port; the paths are checked on the
	// running daemon below.
	probes := map[string]*corev1.Probe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe}
	for what, p := range probes {
		if p == nil || p.HTTPGet == nil {
			t.Fatalf("%s: want an httpGet probe", what)
		}
		if got := containerPort(p.HTTPGet.Port); got != port(t, metrics) {
			t.Errorf("%s port %s (%s): the daemon's HTTP side is on --metrics-addr %s", what, p.HTTPGet.Port.String(), got, metrics)
		}
	}

	// Stop: the grace period covers the graceful stop.
	if pod.TerminationGracePeriodSeconds == nil {
		t.Error("terminationGracePeriodSeconds: unset (30 s by default); set it explicitly")
	} else {
		checkStopTime(t, flags, cfg, "terminationGracePeriodSeconds", time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second)
	}

	// The state file is on a volume of the pod's own (a claim template),
	// the only place a read-only root file system lets it write.
	stateFile := effective(t, flags, cfg, "state-file")
	if stateFile == "" {
		t.Error("no --state-file: a restarted pod would claim a new machine ID each time")
	}
	onClaim := false
	for _, vm := range c.VolumeMounts {
		if strings.HasPrefix(stateFile, strings.TrimSuffix(vm.MountPath, "/")+"/") {
			for _, vct := range sts.Spec.VolumeClaimTemplates {
				onClaim = onClaim || (vct.Name == vm.Name && !vm.ReadOnly)
			}
		}
	}
	if !onClaim {
		t.Errorf("--state-file %s: not on a writable mount of a volumeClaimTemplate", stateFile)
	}
	if path.Dir(stateFile) == "/" {
		t.Errorf("--state-file %s: its directory must hold its lock and temporary copy too", stateFile)
	}

	// Non-root, read-only root file system, no privileges, resources.
	psc, csc := pod.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Error("pod securityContext: want runAsNonRoot and a non-zero runAsUser")
	}
	if psc == nil || psc.FSGroup == nil || psc.RunAsGroup == nil || *psc.FSGroup != *psc.RunAsGroup {
		t.Error("pod securityContext: want fsGroup = runAsGroup, so the state volume is writable")
	}
	if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
		csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation ||
		csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") {
		t.Error("container securityContext: want readOnlyRootFilesystem, allowPrivilegeEscalation false, capabilities drop ALL")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Error("resources: want cpu and memory requests and a memory limit")
	}

	// The secrets hold what the daemon accepts.
	checkRedisURL(t, "Secret redis-url", secretEnv["FLAKED_REDIS"])
	if secretEnv["FLAKED_REQUIREPASS"] == "" {
		t.Error("Secret requirepass: empty; the pods listen off loopback")
	}
	if t.Failed() {
		t.FailNow()
	}

	// Run it: every flag and value as the manifest says (addresses moved
	// to loopback, the state file to a temporary directory, Redis
	// standalone), then the probes' paths on it.
	r := startServe(t, flags, cfg)
	code, body := r.get(t, c.ReadinessProbe.HTTPGet.Path)
	if code != 200 || !strings.HasPrefix(body, "ready") {
		t.Errorf("readinessProbe %s on the ready daemon: %d %q; want 200 from the readiness endpoint", c.ReadinessProbe.HTTPGet.Path, code, body)
	}
	code, body = r.get(t, c.LivenessProbe.HTTPGet.Path)
	if code != 200 {
		t.Errorf("livenessProbe %s on the running daemon: %d %q; want 200", c.LivenessProbe.HTTPGet.Path, code, body)
	}
	if strings.HasPrefix(body, "ready") {
		t.Errorf("livenessProbe %s is the readiness endpoint: a node waiting for Redis would be restarted, not waited for", c.LivenessProbe.HTTPGet.Path)
	}
	if code, _ := r.get(t, "/metrics"); code != 200 {
		t.Errorf("/metrics on --metrics-addr: %d", code)
	}

	// And as the securityContext says: as runAsUser, the state volume
	// writable through fsGroup only, the root file system read-only, no
	// capabilities. The daemon must start, become ready and stop cleanly.
	t.Run("securityContext", func(t *testing.T) {
		if why := canSandbox(); why != "" {
			t.Skipf("cannot make a read-only root here (%s): the securityContext is checked by reading only", why)
		}
		sb := &podSandbox{uid: *psc.RunAsUser, gid: *psc.RunAsGroup, fsGroup: *psc.FSGroup}
		r := startServe(t, flags, serveConfig{args: cfg.args, env: cfg.env, sandbox: sb})
		if code, body := r.get(t, c.ReadinessProbe.HTTPGet.Path); code != 200 {
			t.Errorf("readiness under the securityContext: %d %q", code, body)
		}
		// It is the daemon that runs so, not only the wrapper.
		status := string(readFile(t, fmt.Sprintf("/proc/%d/status", r.cmd.Process.Pid)))
		for _, want := range []string{
			fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d\n", sb.uid, sb.uid, sb.uid, sb.uid),
			fmt.Sprintf("Gid:\t%d\t%d\t%d\t%d\n", sb.gid, sb.gid, sb.gid, sb.gid),
			fmt.Sprintf("Groups:\t%d", sb.fsGroup), "CapEff:\t0000000000000000\n", "Name:\tflaked\n",
		} {
			if !strings.Contains(status, want) {
				t.Errorf("/proc/<pid>/status of the daemon lacks %q:\n%s", want, status)
			}
		}
		r.stop(t)
	})
}

// secretValue is key of the Secret name, from data or stringData.
func secretValue(secrets []*corev1.Secret, name, key string) (string, bool) {
	for _, s := range secrets {
		if s.Name != name {
			continue
		}
		if v, ok := s.StringData[key]; ok {
			return v, true
		}
		if v, ok := s.Data[key]; ok {
			return string(v), true
		}
	}
	return "", false
}

// The selectors match: the StatefulSet's selects its template's pods, the
// Services' and the PodDisruptionBudget's select those pods (and the
// Services' target ports are the container's), and the StatefulSet's
// governing Service is headless.
func TestKubernetes_SelectorsMatchThePods(t *testing.T) {
	m := loadManifests(t, "kubernetes")
	if len(m.sts) != 1 {
		t.Fatalf("want one StatefulSet, have %d", len(m.sts))
	}
	sts := m.sts[0]
	podLabels := labels.Set(sts.Spec.Template.Labels)
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(podLabels) {
		t.Errorf("StatefulSet selector %v does not select its template's labels %v (%v)", sts.Spec.Selector, podLabels, err)
	}
	if len(m.pdbs) != 1 {
		t.Fatalf("want one PodDisruptionBudget, have %d", len(m.pdbs))
	}
	pdb := m.pdbs[0]
	psel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || psel.Empty() || !psel.Matches(podLabels) {
		t.Errorf("PodDisruptionBudget selector %v does not select the StatefulSet's pods %v (%v)", pdb.Spec.Selector, podLabels, err)
	}
	if (pdb.Spec.MaxUnavailable == nil) == (pdb.Spec.MinAvailable == nil) {
		t.Error("PodDisruptionBudget: want exactly one of maxUnavailable, minAvailable")
	}
	if mu := pdb.Spec.MaxUnavailable; mu != nil && sts.Spec.Replicas != nil {
		if n, err := intstr.GetScaledValueFromIntOrPercent(mu, int(*sts.Spec.Replicas), false); err != nil || n < 1 || n >= int(*sts.Spec.Replicas) {
			t.Errorf("PodDisruptionBudget maxUnavailable %s of %d replicas: want 1..replicas-1 (%v)", mu.String(), *sts.Spec.Replicas, err)
		}
	}

	c := sts.Spec.Template.Spec.Containers[0]
	governing := false
	for _, svc := range m.services {
		if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
			t.Errorf("Service %s selector %v does not select the StatefulSet's pods %v", svc.Name, svc.Spec.Selector, podLabels)
		}
		for _, sp := range svc.Spec.Ports {
			found := false
			for _, cp := range c.Ports {
				found = found || (sp.TargetPort.Type == intstr.String && sp.TargetPort.StrVal == cp.Name) ||
					(sp.TargetPort.Type == intstr.Int && sp.TargetPort.IntVal == cp.ContainerPort)
			}
			if !found {
				t.Errorf("Service %s port %s: targetPort %s is no port of the container", svc.Name, sp.Name, sp.TargetPort.String())
			}
		}
		if svc.Name == sts.Spec.ServiceName {
			governing = true
			if svc.Spec.ClusterIP != corev1.ClusterIPNone {
				t.Errorf("Service %s governs the StatefulSet: want it headless (clusterIP: None)", svc.Name)
			}
		}
	}
	if !governing {
		t.Errorf("StatefulSet serviceName %q: no such Service", sts.Spec.ServiceName)
	}
	for _, vct := range sts.Spec.VolumeClaimTemplates {
		if !slices.Contains(vct.Spec.AccessModes, corev1.ReadWriteOnce) && !slices.Contains(vct.Spec.AccessModes, corev1.ReadWriteOncePod) {
			t.Errorf("volumeClaimTemplate %s: want ReadWriteOnce(Pod): each pod's state file is its own", vct.Name)
		}
	}
}

// kustomization.yaml lists every manifest but the example Secret, which
// holds placeholders only.
func TestKubernetes_Kustomization(t *testing.T) {
	m := loadManifests(t, "kubernetes")
	var k kustomization
	if err := yaml.UnmarshalStrict(readFile(t, "kubernetes/kustomization.yaml"), &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.Kind != "Kustomization" || !strings.HasPrefix(k.APIVersion, "kustomize.config.k8s.io/") {
		t.Errorf("kustomization.yaml: kind %q apiVersion %q", k.Kind, k.APIVersion)
	}
	var want []string
	for f, objs := range m.files {
		if !strings.Contains(fmt.Sprint(objs), "Secret/") {
			want = append(want, f)
		} else if slices.Contains(k.Resources, f) {
			t.Errorf("kustomization.yaml: lists %s, whose Secret holds placeholders", f)
		}
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join("kubernetes", r)); err != nil {
			t.Errorf("kustomization.yaml resource %s: %v", r, err)
		}
	}
	slices.Sort(want)
	got := slices.Clone(k.Resources)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("kustomization.yaml resources %v; want %v", got, want)
	}
	image := m.sts[0].Spec.Template.Spec.Containers[0].Image
	for _, img := range k.Images {
		if name, _, _ := strings.Cut(image, ":"); img.Name != name {
			t.Errorf("kustomization.yaml image %q: the StatefulSet's image is %q", img.Name, image)
		}
	}
}

// The StatefulSet makes the fleet's registry before its node starts: one
// init container runs flaked init --if-missing (a no-op once the registry
// exists, so every pod start may run it) with the node's own values of
// every setting init has (layout, namespace, lead, skew: flags or
// environment) and the same Redis URL from the Secret, under the node's
// securityContext. Run for real on a redis-server with those arguments, it
// makes the registry, and again it does nothing, status 0.
func TestKubernetes_InitContainerMakesTheRegistry(t *testing.T) {
	m := loadManifests(t, "kubernetes")
	if len(m.sts) != 1 {
		t.Fatalf("want one StatefulSet, have %d", len(m.sts))
	}
	pod := m.sts[0].Spec.Template.Spec
	if len(pod.InitContainers) != 1 || len(pod.Containers) != 1 {
		t.Fatalf("want one init container and one container, have %d and %d", len(pod.InitContainers), len(pod.Containers))
	}
	ic, c := pod.InitContainers[0], pod.Containers[0]
	if len(ic.Command) != 0 || len(ic.Args) == 0 || ic.Args[0] != "init" || ic.Image != c.Image {
		t.Fatalf("init container: image %q, command %q, args %q; want the node's image and entrypoint, args init and its flags", ic.Image, ic.Command, ic.Args)
	}
	initFlags, _ := commandFlags(t, "init")
	initVals := parseArgs(t, initFlags, ic.Args[1:])
	if initVals["if-missing"] != "true" {
		t.Errorf("init container args %q: without --if-missing every pod start after the first fails (the registry exists)", ic.Args)
	}
	nodeVals := parseArgs(t, serveFlags(t), c.Args[1:])
	envOf := func(c corev1.Container) map[string]string {
		env := map[string]string{}
		for _, e := range c.Env {
			switch {
			case e.ValueFrom == nil:
				env[e.Name] = e.Value
			case e.ValueFrom.SecretKeyRef != nil:
				env[e.Name] = "secret " + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
			}
		}
		return env
	}
	initEnv, nodeEnv := envOf(ic), envOf(c)
	for name, f := range initFlags {
		if name == "if-missing" || name == "help" || strings.HasPrefix(name, "log-") { // the registry's settings only
			continue
		}
		if initVals[name] != nodeVals[name] || initEnv[f.env] != nodeEnv[f.env] {
			t.Errorf("--%s: init container %q (%s=%q), node %q (%s=%q): init must make the node's registry",
				name, initVals[name], f.env, initEnv[f.env], nodeVals[name], f.env, nodeEnv[f.env])
		}
	}
	if !strings.HasPrefix(initEnv["FLAKED_REDIS"], "secret ") {
		t.Errorf("init container FLAKED_REDIS %q: from the Secret, as the node's", initEnv["FLAKED_REDIS"])
	}
	csc := ic.SecurityContext
	if csc == nil || csc.ReadOnlyRootFilesystem == nil || !*csc.ReadOnlyRootFilesystem ||
		csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation ||
		csc.Capabilities == nil || !slices.Contains(csc.Capabilities.Drop, "ALL") {
		t.Error("init container securityContext: want readOnlyRootFilesystem, allowPrivilegeEscalation false, capabilities drop ALL")
	}
	if ic.Resources.Requests.Cpu().IsZero() || ic.Resources.Requests.Memory().IsZero() || ic.Resources.Limits.Memory().IsZero() {
		t.Error("init container resources: want cpu and memory requests and a memory limit")
	}
	if t.Failed() {
		t.FailNow()
	}
	runInitTwice(t, "init container (the next pod start)", ic.Args, initEnv)
}
