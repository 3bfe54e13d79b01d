package k8s

import (
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"uds-lab/tests/internal/lab"
)

// helm lint --strict (warnings fail too) with the default values and each variant.
func TestHelmLint(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", chartDir(t), "--namespace", namespace}, setArgs(v.sets)...)
			if out, err := helm(t, args...); err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
		})
	}
}

// Values the chart must refuse, with a message that says why (its templates'
// own checks, and values.schema.json's).
func TestChartRefusesBadValues(t *testing.T) {
	for _, c := range []struct {
		sets []string
		want string
	}{
		{[]string{"load.enabled=true", "load.testid=t1", "load.paths={uds}"}, "does not exist on Kubernetes: the socket's emptyDir is the app's pod's alone"},
		{[]string{"load.enabled=true", "load.testid=t1", "load.paths={nope}"}, "not a path of catalogue.json"},
		{[]string{"load.enabled=true"}, "load.testid"},
		{[]string{"load.enabled=true", "load.testid=Bad_ID"}, "load.testid"},
		// values.schema.json: unknown keys (a typo would be ignored) and bad values.
		{[]string{"nginx.remoteUpstream=ingress"}, "/nginx/remoteUpstream"},
		{[]string{"load.enabled=true", "load.testid=t1", "load.mode=max"}, "/load/mode"},
		{[]string{"load.enabled=true", "load.testid=t1", "load.mode=sweep"}, "load.mode=sweep: give load.sweepRates or load.sweepTo"},
		// Several generator pods need one start instant, in unix milliseconds.
		{[]string{"load.enabled=true", "load.testid=t1", "load.pods=2"}, "load.pods=2: several generator pods need load.startAt"},
		{[]string{"load.enabled=true", "load.testid=t1", "load.startAt=1795941070"}, "/load/startAt"},
		{[]string{"load.enabled=true", "load.testid=t1", "load.startAt=soon"}, "/load/startAt"},
		{[]string{"load.rat=5"}, "additional properties 'rat'"},
		{[]string{"app.protocol=grpc"}, "/app/protocol"},
		{[]string{"app.socketMode=0666"}, "/app/socketMode"},
		{[]string{"nginx.workerConnections=many"}, "/nginx/workerConnections"},
		// Nothing would scrape the lab; a label the operator could not select by;
		// NetworkPolicies that would not know the scrapers.
		{[]string{"prometheus.enabled=false"}, "prometheus.enabled=false: nothing would scrape the lab; set podMonitors.enabled=true"},
		{[]string{"podMonitors.enabled=true", "podMonitors.labels.release=kube prometheus"}, "/podMonitors/labels/release"},
		{[]string{"podMonitors.enabled=true", "podMonitors.scrapers=null"}, "podMonitors.scrapers is empty"},
		{[]string{"podMonitors.enable=true"}, "additional properties 'enable'"},
		{[]string{"prometheus.enabled=maybe"}, "/prometheus/enabled"},
		// The costs: booleans; node-exporter only for the chart's own Prometheus.
		{[]string{"costs.cadvisor=yes"}, "/costs/cadvisor"},
		{[]string{"costs.nodeExporter=1"}, "/costs/nodeExporter"},
		{[]string{"costs.nodeExporterResources.limits=null"}, "/costs/nodeExporterResources"},
		{[]string{"costs.kubelet=true"}, "additional properties 'kubelet'"},
		{[]string{"prometheus.enabled=false", "podMonitors.enabled=true", "costs.nodeExporter=true"}, "costs.nodeExporter: only the chart's Prometheus"},
	} {
		args := append([]string{"template", release, chartDir(t)}, setArgs(c.sets)...)
		out, err := helm(t, args...)
		if err == nil {
			t.Errorf("helm template %v: rendered, want a refusal\n%.300s", c.sets, out)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("helm template %v: %v; want a message with %q", c.sets, err, c.want)
		}
	}
}

// kubeconform, strict (unknown and duplicated fields fail), against the
// schemas scripts/test-deps.sh generated from Kubernetes' own OpenAPI spec,
// and the PodMonitors against the prometheus-operator's CRDs (crdSchemas):
// every object must have a schema (none skipped).
func TestKubeconform(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) { kubeconform(t, render(t, v.sets)) })
	}
}

// kubeconform checks a rendering against Kubernetes's schemas and the CRDs'.
func kubeconform(t *testing.T, rendering string) {
	t.Helper()
	version := k8sVersion(t)
	schemas := filepath.Join(cache(t), "k8s-schemas")
	if _, err := os.Stat(filepath.Join(schemas, "v"+version+"-standalone-strict")); err != nil {
		t.Fatalf("no schemas for Kubernetes %s (%v): run scripts/test-deps.sh k8s", version, err)
	}
	out, err := exec.Command(lab.Tool(t, "kubeconform"), "-strict", "-summary", "-output", "text",
		"-kubernetes-version", version,
		"-schema-location", schemas+"/{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json",
		"-schema-location", crdSchemas(t)+"/{{ .ResourceKind }}{{ .KindSuffix }}.json",
		writeRendering(t, rendering)).CombinedOutput()
	if err != nil {
		t.Fatalf("kubeconform: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Invalid: 0, Errors: 0, Skipped: 0") {
		t.Fatalf("kubeconform: %s", out)
	}
}

// The waivers of kube-score's findings (k8s/kube-score-waivers.yaml).
type waiver struct {
	Check      string   `yaml:"check"`
	Objects    []string `yaml:"objects"`
	Containers []string `yaml:"containers"`
	Why        string   `yaml:"why"`
}

func readWaivers(t testing.TB) []waiver {
	t.Helper()
	b, err := os.ReadFile(lab.Path(t, "k8s", "kube-score-waivers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Waivers []waiver `yaml:"waivers"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("k8s/kube-score-waivers.yaml: %v", err)
	}
	for _, w := range doc.Waivers {
		if w.Check == "" || len(w.Objects) == 0 || len(strings.Fields(w.Why)) < 8 {
			t.Errorf("k8s/kube-score-waivers.yaml: waiver %+v: wants a check, objects and a reason (why)", w)
		}
	}
	return doc.Waivers
}

// A finding of kube-score: a check an object did not pass, and where.
type finding struct {
	object, check string
	containers    []string
	summary       string
}

func kubeScore(t testing.TB, file string) []finding {
	t.Helper()
	// Exit status 1 means findings, which are read from the JSON.
	minor := strings.Join(strings.SplitN(k8sVersion(t), ".", 3)[:2], ".") // kube-score takes v<major>.<minor>
	out, err := exec.Command(lab.Tool(t, "kube-score"), "score", "--kubernetes-version", "v"+minor,
		"--output-format", "json", file).Output()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("kube-score: %v", err)
	}
	var objects []struct {
		TypeMeta struct {
			Kind string `json:"kind"`
		} `json:"type_meta"`
		ObjectMeta struct {
			Name string `json:"name"`
		} `json:"object_meta"`
		Checks []struct {
			Check struct {
				ID string `json:"id"`
			} `json:"check"`
			Grade    int  `json:"grade"`
			Skipped  bool `json:"skipped"`
			Comments []struct {
				Path    string `json:"path"`
				Summary string `json:"summary"`
			} `json:"comments"`
		} `json:"checks"`
	}
	if jerr := json.Unmarshal(out, &objects); jerr != nil {
		t.Fatalf("kube-score's JSON: %v (%v)\n%.500s", jerr, err, out)
	}
	if len(objects) == 0 {
		t.Fatal("kube-score scored no object")
	}
	var fs []finding
	for _, o := range objects {
		for _, c := range o.Checks {
			if c.Skipped || c.Grade >= 10 { // 10: kube-score's "all OK"; 5 a warning, 1 critical
				continue
			}
			f := finding{object: o.TypeMeta.Kind + "/" + o.ObjectMeta.Name, check: c.Check.ID}
			for _, cm := range c.Comments {
				if cm.Path != "" {
					f.containers = append(f.containers, cm.Path)
				}
				f.summary += cm.Summary + "; "
			}
			fs = append(fs, f)
		}
	}
	return fs
}

func (w waiver) covers(f finding) bool {
	if w.Check != f.check {
		return false
	}
	matched := false
	for _, o := range w.Objects {
		if ok, _ := path.Match(o, f.object); ok {
			matched = true
		}
	}
	if !matched {
		return false
	}
	if len(w.Containers) > 0 {
		for _, c := range f.containers {
			if !contains(w.Containers, c) {
				return false
			}
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// kube-score's default checks, warnings included: every finding on any
// variant is fixed or waived with a reason, and every waiver still matches
// a finding (a fixed one must leave the file).
func TestKubeScore(t *testing.T) {
	waivers := readWaivers(t)
	used := make([]bool, len(waivers))
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			for _, f := range kubeScore(t, writeRendering(t, render(t, v.sets))) {
				waived := false
				for i, w := range waivers {
					if w.covers(f) {
						waived, used[i] = true, true
					}
				}
				if !waived {
					t.Errorf("kube-score: %s: %s %v: %s (fix it, or waive it with a reason in k8s/kube-score-waivers.yaml)",
						f.object, f.check, f.containers, f.summary)
				}
			}
		})
	}
	for i, w := range waivers {
		if !used[i] {
			t.Errorf("k8s/kube-score-waivers.yaml: the waiver of %s for %v matches no finding any more: remove it", w.Check, w.Objects)
		}
	}
}

// The waivers themselves can fail: a finding outside a waiver's objects or
// containers is not covered.
func TestWaiverScope(t *testing.T) {
	w := waiver{Check: "container-security-context-user-group-id", Objects: []string{"Deployment/app"}, Containers: []string{"nginx"}}
	for _, c := range []struct {
		f    finding
		want bool
	}{
		{finding{object: "Deployment/app", check: w.Check, containers: []string{"nginx"}}, true},
		{finding{object: "Deployment/app", check: w.Check, containers: []string{"nginx", "openloop"}}, false},
		{finding{object: "Deployment/prometheus", check: w.Check, containers: []string{"nginx"}}, false},
		{finding{object: "Deployment/app", check: "pod-probes", containers: []string{"nginx"}}, false},
	} {
		if got := w.covers(c.f); got != c.want {
			t.Errorf("waiver %+v covers %+v: %v, want %v", w, c.f, got, c.want)
		}
	}
}
