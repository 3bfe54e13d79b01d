package k8s

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// The chart's values for a cluster's Prometheus (the prometheus-operator's):
// no Prometheus of the chart's, PodMonitors instead.
var clusterPrometheusSets = []string{"prometheus.enabled=false", "podMonitors.enabled=true", "podMonitors.labels.release=monitoring"}

// A CRD, the parts read here.
type crd struct {
	Spec struct {
		Group string `yaml:"group" json:"group"`
		Names struct {
			Kind   string `yaml:"kind" json:"kind"`
			Plural string `yaml:"plural" json:"plural"`
		} `yaml:"names" json:"names"`
		Versions []struct {
			Name   string `yaml:"name" json:"name"`
			Served bool   `yaml:"served" json:"served"`
			Schema struct {
				OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema" json:"openAPIV3Schema"`
			} `yaml:"schema" json:"schema"`
		} `yaml:"versions" json:"versions"`
	} `yaml:"spec" json:"spec"`
}

func readCRD(t testing.TB, file string) (crd, map[string]any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var c crd
	var raw map[string]any
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if err := yaml.Unmarshal(b, &raw); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return c, raw
}

// strict makes an OpenAPI v3 schema refuse unknown fields, as kubeconform's
// strict schemas for Kubernetes' own kinds do: every object schema that lists
// its properties and keeps no unknown fields (x-kubernetes-preserve-unknown-fields)
// gets additionalProperties: false.
func strict(s any) {
	switch v := s.(type) {
	case map[string]any:
		_, listed := v["properties"]
		_, extra := v["additionalProperties"]
		if listed && !extra && v["x-kubernetes-preserve-unknown-fields"] != true {
			v["additionalProperties"] = false
		}
		for _, x := range v {
			strict(x)
		}
	case []any:
		for _, x := range v {
			strict(x)
		}
	}
}

// crdSchemas writes kubeconform's strict schemas for every served version of
// the operator's CRDs into a folder, named as kubeconform looks them up
// (<kind>-<group's first label>-<version>.json, lower case).
func crdSchemas(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "crd-schemas")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range OperatorCRDs(t) {
		c, _ := readCRD(t, f)
		for _, v := range c.Spec.Versions {
			if !v.Served {
				continue
			}
			s := v.Schema.OpenAPIV3Schema
			strict(s)
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			name := strings.ToLower(fmt.Sprintf("%s-%s-%s.json", c.Spec.Names.Kind, strings.Split(c.Spec.Group, ".")[0], v.Name))
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// installCRDs creates the operator's PodMonitor CRD on the server and waits
// until it is established (its API served).
func installCRDs(t *testing.T, s *apiServer) {
	t.Helper()
	f := PodMonitorCRD(t)
	c, raw := readCRD(t, f)
	body, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	if code, b := s.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body, false); code != http.StatusCreated {
		t.Fatalf("%s: HTTP %d %.300s", filepath.Base(f), code, b)
	}
	name := c.Spec.Names.Plural + "." + c.Spec.Group
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		_, b := s.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/" + name)
		if strings.Contains(string(b), `"type":"Established","status":"True"`) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("CRD %s not established after 30 s: %.500s", name, b)
		}
	}
}

// The PodMonitors are the chart's own Prometheus's scrape jobs: one per job,
// named after the release, carrying podMonitors.labels for the operator's
// selector, selecting this release's pods, on the job's port, at its
// interval, with its job name and labels (component, pod, node) and keeping
// only its series (the same regex), so that the dashboards and the report
// read the same series from either Prometheus; and the release's name as
// uds_lab_release, which the report selects by there (report/selection.py). Without the chart's
// Prometheus nothing of it is rendered: its Deployment, Service, Secret,
// Role and NetworkPolicy, the datasource that points at it.
func TestPodMonitorsMirrorTheJobs(t *testing.T) {
	own := prometheusConfig(t, parse(t, render(t, nil)))
	m := parse(t, render(t, clusterPrometheusSets))
	text := render(t, clusterPrometheusSets)
	type endpoint struct {
		Port              string `yaml:"port"`
		Interval          string `yaml:"interval"`
		ScrapeTimeout     string `yaml:"scrapeTimeout"`
		Relabelings       []map[string]any
		MetricRelabelings []map[string]any `yaml:"metricRelabelings"`
	}
	monitors := map[string]struct {
		Metadata struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec struct {
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			Endpoints []endpoint `yaml:"podMetricsEndpoints"`
		} `yaml:"spec"`
	}{}
	for _, doc := range strings.Split(text, "\n---") {
		if !strings.Contains(doc, "\nkind: PodMonitor\n") {
			continue
		}
		var o struct {
			Metadata struct {
				Name string `yaml:"name"`
			} `yaml:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatal(err)
		}
		v := monitors[o.Metadata.Name]
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatal(err)
		}
		monitors[o.Metadata.Name] = v
	}
	jobs := 0
	for _, j := range own.ScrapeConfigs {
		// Prometheus's own: the cluster's scrapes itself; and the costs
		// (costs.*), the chart's Prometheus's alone: the cluster's has
		// cAdvisor and node-exporter jobs of its own.
		if j.JobName == "prometheus" || j.JobName == "cadvisor" || strings.HasPrefix(j.JobName, "node") {
			continue
		}
		jobs++
		pm, ok := monitors[named(j.JobName)]
		if !ok || len(pm.Spec.Endpoints) != 1 {
			t.Errorf("job %s: no PodMonitor %s with one endpoint", j.JobName, named(j.JobName))
			continue
		}
		if pm.Metadata.Labels["release"] != "monitoring" {
			t.Errorf("PodMonitor %s: labels %v, without podMonitors.labels (release=monitoring)", named(j.JobName), pm.Metadata.Labels)
		}
		e := pm.Spec.Endpoints[0]
		interval, timeout := j.ScrapeInterval, j.ScrapeTimeout
		if interval == "" {
			interval, timeout = own.Global.ScrapeInterval, own.Global.ScrapeTimeout
		}
		if e.Port != j.port() || e.Interval != interval || e.ScrapeTimeout != timeout {
			t.Errorf("PodMonitor %s: port %s every %s (timeout %s); the chart's job: %s every %s (%s)",
				named(j.JobName), e.Port, e.Interval, e.ScrapeTimeout, j.port(), interval, timeout)
		}
		if fmt.Sprint(e.MetricRelabelings) != fmt.Sprint([]map[string]any{{"sourceLabels": []any{"__name__"}, "regex": j.keep(), "action": "keep"}}) {
			t.Errorf("PodMonitor %s keeps %v; the chart's job keeps %q", named(j.JobName), e.MetricRelabelings, j.keep())
		}
		want := fmt.Sprint([]map[string]any{{"targetLabel": "job", "replacement": j.JobName},
			{"sourceLabels": []any{"__meta_kubernetes_pod_label_app_kubernetes_io_component"}, "targetLabel": "component"},
			{"sourceLabels": []any{"__meta_kubernetes_pod_name"}, "targetLabel": "pod"},
			{"sourceLabels": []any{"__meta_kubernetes_pod_node_name"}, "targetLabel": "node"},
			{"targetLabel": "uds_lab_release", "replacement": release}})
		if fmt.Sprint(e.Relabelings) != want {
			t.Errorf("PodMonitor %s relabels %v, want %s", named(j.JobName), e.Relabelings, want)
		}
		sel := pm.Spec.Selector.MatchLabels
		if sel["app.kubernetes.io/instance"] != release || sel["app.kubernetes.io/name"] != "uds-lab" || len(sel) != 2 {
			t.Errorf("PodMonitor %s selects %v, want this release's pods", named(j.JobName), sel)
		}
	}
	if jobs != 4 || len(monitors) != jobs {
		t.Errorf("%d PodMonitors for the chart's %d jobs (app, nginx, nginx-log, openloop)", len(monitors), jobs)
	}
	for _, o := range m {
		if o.Metadata.Labels["app.kubernetes.io/component"] == "prometheus" || strings.Contains(o.Metadata.Name, "prometheus") || o.Metadata.Name == named("datasource") {
			t.Errorf("prometheus.enabled=false renders %s %s", o.Kind, o.Metadata.Name)
		}
	}
	if len(parse(t, render(t, nil)).kinds("PodMonitor")) != 0 {
		t.Error("the default values render PodMonitors: they need the operator's CRDs, which a cluster may lack")
	}
}

// kinds returns the objects of one kind.
func (m Manifests) kinds(kind string) []*Object {
	var out []*Object
	for _, o := range m {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// The chart's own Prometheus config, the parts the PodMonitors mirror.
type promJob struct {
	JobName        string `yaml:"job_name"`
	ScrapeInterval string `yaml:"scrape_interval"`
	ScrapeTimeout  string `yaml:"scrape_timeout"`
	Relabel        []struct {
		SourceLabels []string `yaml:"source_labels"`
		Regex        string   `yaml:"regex"`
		Action       string   `yaml:"action"`
	} `yaml:"relabel_configs"`
	MetricRelabel []struct {
		Regex  string `yaml:"regex"`
		Action string `yaml:"action"`
	} `yaml:"metric_relabel_configs"`
}

type promConfig struct {
	Global struct {
		ScrapeInterval string `yaml:"scrape_interval"`
		ScrapeTimeout  string `yaml:"scrape_timeout"`
	} `yaml:"global"`
	ScrapeConfigs []promJob `yaml:"scrape_configs"`
}

func prometheusConfig(t testing.TB, m Manifests) promConfig {
	t.Helper()
	var c promConfig
	if err := yaml.Unmarshal([]byte(m.must(t, "ConfigMap", release+"-prometheus").Data["prometheus.yml"]), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// port is the container port the job keeps (its keep rule on the port's name).
func (j promJob) port() string {
	for _, r := range j.Relabel {
		if r.Action == "keep" && len(r.SourceLabels) == 1 && r.SourceLabels[0] == "__meta_kubernetes_pod_container_port_name" {
			return r.Regex
		}
	}
	return ""
}

// keep is the regex of the series the job keeps.
func (j promJob) keep() string {
	for _, r := range j.MetricRelabel {
		if r.Action == "keep" {
			return r.Regex
		}
	}
	return ""
}
