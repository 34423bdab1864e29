package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"text/template"

	yaml "go.yaml.in/yaml/v3"
)

// The Kubernetes manifests (deploy/kubernetes) and the Helm chart
// (deploy/helm/raftlock) are checked here without a cluster or a helm
// binary (neither Debian nor PyPI nor npm packages one, and prebuilt
// binaries are not fetched from elsewhere). The chart's templates keep to
// text/template and the few Sprig helpers of helmFuncs, so that this test
// renders them exactly as helm would; a template using any other helper
// fails to parse here.

// k8sObject is one decoded manifest document.
type k8sObject = map[string]any

// decodeDocs decodes every YAML document of data; an empty one is skipped.
func decodeDocs(data []byte) ([]k8sObject, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []k8sObject
	for {
		var o k8sObject
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if o == nil {
			continue
		}
		for _, k := range []string{"apiVersion", "kind"} {
			if s, _ := o[k].(string); s == "" {
				return nil, fmt.Errorf("a document without %s: %v", k, o)
			}
		}
		if name, _ := get(o, "metadata", "name").(string); name == "" {
			return nil, fmt.Errorf("a %s without metadata.name", o["kind"])
		}
		out = append(out, o)
	}
}

// get walks o by keys (strings for maps, ints for lists); nil if absent.
func get(o any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := o.(map[string]any)
			if !ok {
				return nil
			}
			o = m[k]
		case int:
			l, ok := o.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			o = l[k]
		}
	}
	return o
}

// deployRoot is the repository's root, from this package's directory.
func deployRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// plainManifests decodes every file of deploy/kubernetes.
func plainManifests(t testing.TB) []k8sObject {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(deployRoot(t), "deploy", "kubernetes", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no deploy/kubernetes/*.yaml")
	}
	var all []k8sObject
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeDocs(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		all = append(all, objs...)
	}
	return all
}

// helmFuncs are the Sprig helpers the chart may use, as Sprig defines them.
var helmFuncs = template.FuncMap{
	"until": func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	},
	"int": func(v any) (int, error) {
		switch x := v.(type) {
		case int:
			return x, nil
		case float64:
			return int(x), nil
		case string:
			return strconv.Atoi(x)
		}
		return 0, fmt.Errorf("int of %T", v)
	},
	"toYaml": func(v any) (string, error) {
		b, err := yaml.Marshal(v)
		return strings.TrimSuffix(string(b), "\n"), err
	},
	"nindent": func(n int, s string) string {
		pad := strings.Repeat(" ", n)
		return "\n" + pad + strings.ReplaceAll(s, "\n", "\n"+pad)
	},
	"fail": func(msg string) (string, error) { return "", errors.New(msg) },
}

// renderChart renders deploy/helm/raftlock as helm template would, for the
// release name and namespace, with values.yaml changed by set (dotted
// paths: "tls.enabled": false).
func renderChart(t testing.TB, release string, set map[string]any) ([]byte, error) {
	t.Helper()
	dir := filepath.Join(deployRoot(t), "deploy", "helm", "raftlock")
	data, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	for path, v := range set {
		keys := strings.Split(path, ".")
		m := values
		for _, k := range keys[:len(keys)-1] {
			m = m[k].(map[string]any)
		}
		m[keys[len(keys)-1]] = v
	}
	files, _ := filepath.Glob(filepath.Join(dir, "templates", "*.yaml"))
	sort.Strings(files)
	ctx := map[string]any{"Values": values, "Release": map[string]any{"Name": release, "Namespace": "default"}}
	var out bytes.Buffer
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := template.New(filepath.Base(f)).Funcs(helmFuncs).Option("missingkey=error").Parse(string(src))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out.WriteString("---\n")
		if err := tmpl.Execute(&out, ctx); err != nil {
			return nil, err
		}
		out.WriteString("\n")
	}
	return out.Bytes(), nil
}

// byKind indexes objects by "Kind/name".
func byKind(objs []k8sObject) map[string]k8sObject {
	out := map[string]k8sObject{}
	for _, o := range objs {
		out[fmt.Sprintf("%s/%s", o["kind"], get(o, "metadata", "name"))] = o
	}
	return out
}

// podCommand returns the raftlockd container's command line of the
// StatefulSet in objs for pod ordinal i, with Kubernetes' $(VAR) expansion
// of the container's env: POD_NAME, POD_NAMESPACE ("default") and POD_IP
// (ip(i)).
func podCommand(t testing.TB, objs []k8sObject, i int, ip func(int) string) (cmd []string, sts k8sObject) {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == "StatefulSet" {
			sts = o
		}
	}
	if sts == nil {
		t.Fatal("no StatefulSet")
	}
	c := get(sts, "spec", "template", "spec", "containers", 0)
	env := map[string]string{"POD_NAME": fmt.Sprintf("%s-%d", get(sts, "metadata", "name"), i), "POD_NAMESPACE": "default", "POD_IP": ip(i)}
	for _, e := range get(c, "env").([]any) {
		name := get(e, "name").(string)
		if _, ok := env[name]; !ok && name != "GOMEMLIMIT" {
			t.Errorf("env %s: the test does not know it", name)
		}
	}
	ref := regexp.MustCompile(`\$\(([A-Z_]+)\)`)
	for _, a := range get(c, "command").([]any) {
		cmd = append(cmd, ref.ReplaceAllStringFunc(a.(string), func(m string) string {
			v, ok := env[m[2:len(m)-1]]
			if !ok {
				t.Errorf("%s: no such env var", m)
			}
			return v
		}))
	}
	return cmd, sts
}

// checkDeployment checks a rendered set of objects: every pod's command
// line is one the daemon's flag parser accepts, naming the pod, its
// peers by the headless Service's stable names and the container's ports;
// the probes ask the metrics listener; the headless Service publishes
// not-ready pods; the PDB lets one member go at a time.
func checkDeployment(t *testing.T, name string, objs []k8sObject, replicas int, wantFlags, noFlags []string) {
	t.Helper()
	idx := byKind(objs)
	sts := idx["StatefulSet/"+name]
	headless := idx["Service/"+name+"-peers"]
	client := idx["Service/"+name]
	pdb := idx["PodDisruptionBudget/"+name]
	if sts == nil || headless == nil || client == nil || pdb == nil || len(objs) != 4 {
		t.Fatalf("%s: objects %v: want a StatefulSet, two Services and a PodDisruptionBudget", name, keys(idx))
	}
	if get(sts, "spec", "replicas") != replicas || get(sts, "spec", "serviceName") != name+"-peers" || get(sts, "spec", "podManagementPolicy") != "Parallel" {
		t.Errorf("%s: StatefulSet spec %v", name, get(sts, "spec"))
	}
	if get(headless, "spec", "clusterIP") != "None" || get(headless, "spec", "publishNotReadyAddresses") != true {
		t.Errorf("%s: the headless Service: %v", name, get(headless, "spec"))
	}
	if get(pdb, "spec", "maxUnavailable") != 1 {
		t.Errorf("%s: PDB %v", name, get(pdb, "spec"))
	}
	c := get(sts, "spec", "template", "spec", "containers", 0)
	ports := map[string]int{}
	for _, p := range get(c, "ports").([]any) {
		ports[get(p, "name").(string)] = get(p, "containerPort").(int)
	}
	for _, probe := range []struct{ kind, path string }{{"readinessProbe", "/v1/health"}, {"livenessProbe", "/v1/health?stale"}} {
		if get(c, probe.kind, "httpGet", "port") != "metrics" || get(c, probe.kind, "httpGet", "path") != probe.path {
			t.Errorf("%s: %s %v: want GET %s on the metrics port", name, probe.kind, get(c, probe.kind), probe.path)
		}
	}
	if get(c, "lifecycle", "preStop", "sleep", "seconds") == nil || get(sts, "spec", "template", "spec", "terminationGracePeriodSeconds") != 30 {
		t.Errorf("%s: preStop %v, grace %v", name, get(c, "lifecycle"), get(sts, "spec", "template", "spec", "terminationGracePeriodSeconds"))
	}
	mounts := map[string]bool{}
	for _, m := range get(c, "volumeMounts").([]any) {
		mounts[get(m, "mountPath").(string)] = true
	}
	for i := 0; i < replicas; i++ {
		cmd, _ := podCommand(t, objs, i, func(i int) string { return fmt.Sprintf("10.0.0.%d", i+1) })
		if cmd[0] != "/raftlockd" {
			t.Fatalf("%s: command %q: the image's binary is /raftlockd", name, cmd)
		}
		var stderr bytes.Buffer
		o, err := parse(cmd[1:], &stderr)
		if err != nil {
			t.Fatalf("%s pod %d: raftlockd refuses %q: %v %s", name, i, cmd, err, stderr.String())
		}
		pod := fmt.Sprintf("%s-%d", name, i)
		if o.id != pod || o.dataDir != "/data" || !mounts["/data"] {
			t.Errorf("%s: --id %q --data-dir %q (mounts %v)", pod, o.id, o.dataDir, mounts)
		}
		peers, err := parsePeers(o.peers)
		if err != nil || len(peers) != replicas {
			t.Fatalf("%s: --peers %q: %v", pod, o.peers, err)
		}
		for j, p := range peers {
			id := fmt.Sprintf("%s-%d", name, j)
			if want := fmt.Sprintf("%s.%s-peers.default.svc:%d", id, name, ports["raft"]); p.ID != id || p.RaftAddr != want {
				t.Errorf("%s: peer %d is %s=%s, want %s=%s", pod, j, p.ID, p.RaftAddr, id, want)
			}
		}
		if o.raftAdvertise != peers[i].RaftAddr {
			t.Errorf("%s: --raft-advertise %q is not its --peers entry %q", pod, o.raftAdvertise, peers[i].RaftAddr)
		}
		for flag, addr := range map[string]string{"http": o.httpAddr, "raft": o.raftAddr, "metrics": o.metricsAddr} {
			if !strings.HasSuffix(addr, ":"+strconv.Itoa(ports[flag])) {
				t.Errorf("%s: the %s address %q is not on the container's %s port %d", pod, flag, addr, flag, ports[flag])
			}
		}
		for _, f := range []string{o.tlsCert, o.tlsKey, o.tlsCA} {
			if f != "" && !mounts[filepath.Dir(f)] {
				t.Errorf("%s: %s is not in a mounted volume", pod, f)
			}
		}
		line := strings.Join(cmd, " ")
		for _, f := range wantFlags {
			if !strings.Contains(line+" ", f+" ") && !strings.Contains(line, f+"=") {
				t.Errorf("%s: %s missing from %q", pod, f, line)
			}
		}
		for _, f := range noFlags {
			if strings.Contains(line+" ", f+" ") || strings.Contains(line, f+"=") {
				t.Errorf("%s: %s in %q", pod, f, line)
			}
		}
	}
}

func keys(m map[string]k8sObject) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The plain manifests parse, and each pod's command line is one raftlockd
// accepts, with --peers naming the StatefulSet's stable names.
func TestKubernetesManifestsCommandLineIsWhatTheDaemonAccepts(t *testing.T) {
	checkDeployment(t, "raftlock", plainManifests(t), 3, []string{"--tls-cert", "--acl", "--metrics-addr"}, []string{"--insecure"})
}

// The Helm chart renders, with its default values, exactly the plain
// manifests' objects; with 5 replicas, TLS (and client certificates) and
// ACLs switched, objects the daemon accepts; and refuses 4 replicas.
func TestHelmChartRendersTheManifestsAndEveryVariantIsAccepted(t *testing.T) {
	out, err := renderChart(t, "raftlock", nil)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := decodeDocs(out)
	if err != nil {
		t.Fatalf("rendered chart: %v\n%s", err, out)
	}
	plain := byKind(plainManifests(t))
	for k, o := range byKind(rendered) {
		if !reflect.DeepEqual(o, plain[k]) {
			t.Errorf("%s: the chart's default differs from deploy/kubernetes:\nchart: %v\nplain: %v", k, o, plain[k])
		}
	}
	if len(rendered) != len(plain) {
		t.Errorf("the chart renders %d objects, deploy/kubernetes has %d", len(rendered), len(plain))
	}
	for _, v := range []struct {
		name      string
		set       map[string]any
		replicas  int
		want, not []string
	}{
		{"five", map[string]any{"replicas": 5}, 5, []string{"--tls-cert", "--acl"}, []string{"--insecure", "--client-cert-auth"}},
		{"plain", map[string]any{"tls.enabled": false, "acl.enabled": false}, 3, []string{"--insecure"}, []string{"--tls-cert", "--acl"}},
		{"mtls", map[string]any{"replicas": 5, "tls.clientCertAuth": true, "storage.storageClassName": "fast"}, 5, []string{"--tls-cert", "--client-cert-auth", "--acl"}, []string{"--insecure"}},
	} {
		out, err := renderChart(t, "locks", v.set)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		objs, err := decodeDocs(out)
		if err != nil {
			t.Fatalf("%s: %v\n%s", v.name, err, out)
		}
		checkDeployment(t, "locks", objs, v.replicas, v.want, v.not)
		sts := byKind(objs)["StatefulSet/locks"]
		if sc, _ := get(sts, "spec", "volumeClaimTemplates", 0, "spec", "storageClassName").(string); sc != v.set["storage.storageClassName"] && (sc != "" || v.set["storage.storageClassName"] != nil) {
			t.Errorf("%s: storageClassName %q", v.name, sc)
		}
	}
	if _, err := renderChart(t, "raftlock", map[string]any{"replicas": 4}); err == nil || !strings.Contains(err.Error(), "replicas must be 3 or 5") {
		t.Errorf("replicas 4: %v, want refused", err)
	}
}

// dashboardAndRuleExprs returns every PromQL expression of
// deploy/grafana/raftlock.json's panels and deploy/prometheus/alerts.yml's
// rules, each with where it is.
func dashboardAndRuleExprs(t testing.TB) map[string]string {
	t.Helper()
	root := deployRoot(t)
	out := map[string]string{}
	data, err := os.ReadFile(filepath.Join(root, "deploy", "grafana", "raftlock.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("raftlock.json: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			out[tg.Expr] = "panel " + p.Title
		}
	}
	data, err = os.ReadFile(filepath.Join(root, "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct{ Alert, Expr string }
		}
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out[r.Expr] = "alert " + r.Alert
		}
	}
	if len(out) < 10 {
		t.Fatalf("only %d expressions in the dashboard and the rules", len(out))
	}
	return out
}

// metricNameRef finds the metric names an expression reads: raftlock's
// and hashicorp/raft's (Prometheus' own "up" is not a node's).
var metricNameRef = regexp.MustCompile(`\b(raftlock_[a-z_]+|raft_[A-Za-z_]+)\b`)

// checkDashboardMetricsExist checks that every metric a panel or a rule
// names is a series of exposition, a node's GET /metrics answer.
func checkDashboardMetricsExist(t *testing.T, exposition string) {
	t.Helper()
	for expr, where := range dashboardAndRuleExprs(t) {
		for _, name := range metricNameRef.FindAllString(expr, -1) {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `[{ ]`).MatchString(exposition) {
				t.Errorf("%s reads %s, which a live node's /metrics does not have", where, name)
			}
		}
	}
}
