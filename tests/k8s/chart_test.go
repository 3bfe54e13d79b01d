// Package k8s checks the Helm chart (k8s/uds-lab) offline: helm lint, helm
// template with the default values and variants, kubeconform against
// Kubernetes' own schemas (strict), kube-score (findings waived only in
// k8s/kube-score-waivers.yaml), nginx -t on the config each nginx renders,
// promtool on Prometheus's, the plan the Job would run, and the pod's socket
// sharing and probes. The tools come from scripts/test-deps.sh (word k8s).
package k8s

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"uds-lab/tests/internal/lab"
)

const (
	release   = "lab"
	namespace = "uds-lab"
)

// A variant: helm template with these --set values.
type variant struct {
	name string
	sets []string
}

// The default values and the variants every check runs on.
var variants = []variant{
	{"default", nil},
	{"load", []string{"load.enabled=true", "load.testid=t1"}},
	{"fastcgi-stack", []string{"app.protocol=fastcgi", "app.image=uds-lab/php-fpm:local", "app.livenessCommand=null", "app.extraEnv.PHP_FPM_CHILDREN=8",
		"load.enabled=true", "load.testid=php1", "load.scenario=ping\\,cpu", "load.seed=7"}},
	{"pod-upstream", []string{"nginx.remoteUpstream=pod", "networkPolicies.prometheusReaders[0].podSelector.matchLabels.app=grafana"}},
	{"pinned-node", []string{"pinning.guaranteed=true", "nodeUnderTest.labels.uds-lab/role=under-test",
		"sysctls.somaxconn=64", "load.enabled=true", "load.testid=pinned", "load.paths={tcp-lo,uds-lo}",
		"nginx.accessLog=off", "costs.nodeExporter=true"}},
	// Each workload's own resources and placement (a platform's nodes, taints
	// and spreading), with the node under test: placedSets.
	{"placed", placedSets},
	// The cluster's Prometheus (the prometheus-operator's) instead of the
	// chart's: PodMonitors, with a run.
	{"cluster-prometheus", append([]string{"load.enabled=true", "load.testid=cp1"}, clusterPrometheusSets...)},
}

// Per-component resources, nodeSelector, tolerations and affinity, each
// different, so a test can tell where each one went (TestComponentValues).
var placedSets = []string{
	"load.enabled=true", "load.testid=placed", "nodeUnderTest.labels.uds-lab/role=under-test",
	"app.resources.requests.cpu=250m", "app.resources.limits.memory=300Mi", "app.initResources.limits.cpu=50m",
	"app.nodeSelector.pool=app-pool",
	"app.tolerations[0].key=dedicated", "app.tolerations[0].operator=Equal", "app.tolerations[0].value=app", "app.tolerations[0].effect=NoSchedule",
	"nginx.resources.limits.cpu=2", "nginx.resources.requests.cpu=150m", "nginx.nodeSelector.pool=nginx-pool",
	"nginx.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=50",
	"nginx.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey=kubernetes.io/hostname",
	`nginx.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector.matchLabels.app\.kubernetes\.io/component=app`,
	"nginxExporter.resources.limits.memory=48Mi", "logExporter.resources.limits.cpu=150m",
	"prometheus.resources.limits.memory=1Gi", "prometheus.authResources.limits.cpu=300m",
	"prometheus.tolerations[0].operator=Exists", "prometheus.nodeSelector.pool=monitoring",
	"load.resources.limits.cpu=2", "load.resources.requests.cpu=1500m", "load.planResources.limits.memory=96Mi",
	"load.tolerations[0].key=load", "load.tolerations[0].operator=Exists", "load.tolerations[0].effect=NoExecute",
	"load.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight=10",
	"load.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].key=pool",
	"load.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].operator=In",
	"load.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].values[0]=load-pool",
}

func chartDir(t testing.TB) string { return lab.Path(t, "k8s", "uds-lab") }

// helm runs helm with args and returns its stdout; stderr joins the error.
func helm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(lab.Tool(t, "helm"), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		err = errors.New(err.Error() + ": " + errb.String())
	}
	return out.String(), err
}

func setArgs(sets []string) []string {
	var args []string
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return args
}

// render runs helm template on the chart with sets and returns its output.
func render(t testing.TB, sets []string) string {
	t.Helper()
	args := append([]string{"template", release, chartDir(t), "--namespace", namespace}, setArgs(sets)...)
	out, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm template %v: %v", sets, err)
	}
	return out
}

// The subset of the manifests the tests read.
type (
	Object struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name   string            `yaml:"name"`
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Data map[string]string `yaml:"data"`
		Spec struct {
			Template struct {
				Metadata struct {
					Labels map[string]string `yaml:"labels"`
				} `yaml:"metadata"`
				Spec PodSpec `yaml:"spec"`
			} `yaml:"template"`
			Selector any `yaml:"selector"` // a Service's labels; a Deployment's matchLabels
			Ports    []struct {
				Name       string `yaml:"name"`
				Port       int    `yaml:"port"`
				TargetPort string `yaml:"targetPort"`
			} `yaml:"ports"`
			ClusterIP string `yaml:"clusterIP"`
		} `yaml:"spec"`
	}
	PodSpec struct {
		SecurityContext struct {
			FSGroup        *int64          `yaml:"fsGroup"`
			RunAsNonRoot   *bool           `yaml:"runAsNonRoot"`
			SeccompProfile *SeccompProfile `yaml:"seccompProfile"`
			Sysctls        []struct {
				Name  string `yaml:"name"`
				Value string `yaml:"value"`
			} `yaml:"sysctls"`
		} `yaml:"securityContext"`
		HostPID        bool              `yaml:"hostPID"`
		NodeSelector   map[string]string `yaml:"nodeSelector"`
		Tolerations    []map[string]any  `yaml:"tolerations"`
		Affinity       map[string]any    `yaml:"affinity"`
		InitContainers []Container       `yaml:"initContainers"`
		Containers     []Container       `yaml:"containers"`
		Volumes        []Volume          `yaml:"volumes"`
	}
	Container struct {
		Name            string   `yaml:"name"`
		Image           string   `yaml:"image"`
		Command         []string `yaml:"command"`
		Args            []string `yaml:"args"`
		RestartPolicy   string   `yaml:"restartPolicy"`
		Env             []EnvVar `yaml:"env"`
		VolumeMounts    []Mount  `yaml:"volumeMounts"`
		ReadinessProbe  *Probe   `yaml:"readinessProbe"`
		LivenessProbe   *Probe   `yaml:"livenessProbe"`
		StartupProbe    *Probe   `yaml:"startupProbe"`
		SecurityContext struct {
			RunAsUser                *int64 `yaml:"runAsUser"`
			RunAsGroup               *int64 `yaml:"runAsGroup"`
			RunAsNonRoot             *bool  `yaml:"runAsNonRoot"`
			ReadOnlyRootFilesystem   *bool  `yaml:"readOnlyRootFilesystem"`
			AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
			Privileged               *bool  `yaml:"privileged"`
			Capabilities             *struct {
				Add  []string `yaml:"add"`
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
			SeccompProfile *SeccompProfile `yaml:"seccompProfile"`
		} `yaml:"securityContext"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		Resources struct {
			Limits   map[string]string `yaml:"limits"`
			Requests map[string]string `yaml:"requests"`
		} `yaml:"resources"`
	}
	EnvVar struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	}
	Mount struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		SubPath   string `yaml:"subPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	}
	SeccompProfile struct {
		Type string `yaml:"type"`
	}
	Probe struct {
		Exec *struct {
			Command []string `yaml:"command"`
		} `yaml:"exec"`
		HTTPGet *HTTPGet `yaml:"httpGet"`
	}
	HTTPGet struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"` // a number, or the name of one of the container's ports
	}
	Volume struct {
		Name      string         `yaml:"name"`
		EmptyDir  map[string]any `yaml:"emptyDir"`
		ConfigMap *struct {
			Name  string `yaml:"name"`
			Items []struct {
				Key  string `yaml:"key"`
				Path string `yaml:"path"`
			} `yaml:"items"`
		} `yaml:"configMap"`
		Secret *struct {
			SecretName string `yaml:"secretName"`
		} `yaml:"secret"`
		HostPath *struct {
			Path string `yaml:"path"`
		} `yaml:"hostPath"`
		Projected *struct {
			Sources []struct {
				ConfigMap *struct {
					Name string `yaml:"name"`
				} `yaml:"configMap"`
			} `yaml:"sources"`
		} `yaml:"projected"`
	}
)

// Manifests is a rendering, parsed.
type Manifests []*Object

func parse(t testing.TB, text string) Manifests {
	t.Helper()
	var out Manifests
	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var o Object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("helm template's output: %v", err)
		}
		if o.Kind != "" {
			out = append(out, &o)
		}
	}
}

// Get returns the object of that kind and name, or nil.
func (m Manifests) Get(kind, name string) *Object {
	for _, o := range m {
		if o.Kind == kind && o.Metadata.Name == name {
			return o
		}
	}
	return nil
}

func (m Manifests) must(t testing.TB, kind, name string) *Object {
	t.Helper()
	o := m.Get(kind, name)
	if o == nil {
		t.Fatalf("the chart renders no %s %s", kind, name)
	}
	return o
}

// Container returns the pod's container (or init container) of that name, or nil.
func (p *PodSpec) Container(name string) *Container {
	for i := range p.Containers {
		if p.Containers[i].Name == name {
			return &p.Containers[i]
		}
	}
	for i := range p.InitContainers {
		if p.InitContainers[i].Name == name {
			return &p.InitContainers[i]
		}
	}
	return nil
}

// Volume returns the pod's volume of that name, or nil.
func (p *PodSpec) Volume(name string) *Volume {
	for i := range p.Volumes {
		if p.Volumes[i].Name == name {
			return &p.Volumes[i]
		}
	}
	return nil
}

// EnvMap is a container's environment as a map.
func (c *Container) EnvMap() map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

// Mount returns where the container mounts that volume, or nil.
func (c *Container) Mount(volume string) *Mount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == volume {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// writeRendering writes a rendering to a file in a temp folder for the tools.
func writeRendering(t testing.TB, text string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "manifests.yaml")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// k8sVersion is the Kubernetes version kubeconform's schemas were generated
// for: scripts/test-deps.sh's K8S_VERSION, the one place it is set.
func k8sVersion(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(lab.Path(t, "scripts", "test-deps.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^K8S_VERSION=v([0-9.]+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("scripts/test-deps.sh sets no K8S_VERSION=v<version>")
	}
	return string(m[1])
}

// named is an object's name in the rendering: the release's name, then the
// component's (lab-app, lab-openloop-t1).
func named(component string) string { return release + "-" + component }
