package k8s

import (
	"reflect"
	"strings"
	"testing"
)

// A workload's pod in a rendering: a Deployment's or the Job's.
func pod(t *testing.T, m Manifests, kind, name string) *PodSpec {
	t.Helper()
	return &m.must(t, kind, name).Spec.Template.Spec
}

func wantResources(t *testing.T, where string, c *Container, limits, requests map[string]string) {
	t.Helper()
	if c == nil {
		t.Errorf("%s: no such container", where)
		return
	}
	if !reflect.DeepEqual(c.Resources.Limits, limits) {
		t.Errorf("%s: limits %v, want %v", where, c.Resources.Limits, limits)
	}
	if !reflect.DeepEqual(c.Resources.Requests, requests) {
		t.Errorf("%s: requests %v, want %v", where, c.Resources.Requests, requests)
	}
}

func q(cpu, memory, disk string) map[string]string {
	return map[string]string{"cpu": cpu, "memory": memory, "ephemeral-storage": disk}
}

// The defaults are what the chart rendered before resources were values:
// CPU requests of 100m for the app, both nginx and Prometheus (limits as
// .env's), every other container's requests its limits; pinning.guaranteed
// makes the app's and nginx's pods Guaranteed (every request its limit).
func TestResourcesDefaults(t *testing.T) {
	m := parse(t, render(t, []string{"load.enabled=true", "load.testid=t1"}))
	app, nginx, prom, job := pod(t, m, "Deployment", named("app")), pod(t, m, "Deployment", named("nginx")),
		pod(t, m, "Deployment", named("prometheus")), pod(t, m, "Job", named("openloop-t1"))
	for _, c := range []struct {
		where           string
		c               *Container
		limits, request map[string]string
	}{
		{"app/app", app.Container("app"), q("1", "256Mi", "1Gi"), q("100m", "256Mi", "1Gi")},
		{"app/nginx", app.Container("nginx"), q("1", "128Mi", "64Mi"), q("100m", "128Mi", "64Mi")},
		{"app/log-exporter", app.Container("log-exporter"), q("200m", "64Mi", "64Mi"), q("200m", "64Mi", "64Mi")},
		{"app/remove-stale-socket", app.Container("remove-stale-socket"), q("100m", "32Mi", "64Mi"), q("100m", "32Mi", "64Mi")},
		{"nginx/nginx", nginx.Container("nginx"), q("1", "128Mi", "64Mi"), q("100m", "128Mi", "64Mi")},
		{"nginx/nginx-exporter", nginx.Container("nginx-exporter"), q("200m", "64Mi", "64Mi"), q("200m", "64Mi", "64Mi")},
		{"nginx/log-exporter", nginx.Container("log-exporter"), q("200m", "64Mi", "64Mi"), q("200m", "64Mi", "64Mi")},
		{"prometheus/prometheus", prom.Container("prometheus"), q("1", "512Mi", "3Gi"), q("100m", "512Mi", "3Gi")},
		{"prometheus/prometheus-auth", prom.Container("prometheus-auth"), q("500m", "64Mi", "64Mi"), q("500m", "64Mi", "64Mi")},
		{"openloop/openloop", job.Container("openloop"), q("1", "2Gi", "512Mi"), q("1", "2Gi", "512Mi")},
		{"openloop/plan", job.Container("plan"), q("200m", "128Mi", "64Mi"), q("200m", "128Mi", "64Mi")},
	} {
		wantResources(t, c.where, c.c, c.limits, c.request)
	}
	for name, p := range map[string]*PodSpec{"app": app, "nginx": nginx, "prometheus": prom, "openloop": job} {
		if p.NodeSelector != nil || p.Tolerations != nil || p.Affinity != nil {
			t.Errorf("%s's pod: placement by default: nodeSelector %v, tolerations %v, affinity %v", name, p.NodeSelector, p.Tolerations, p.Affinity)
		}
	}

	// Pinned: every container of the pods under test in the Guaranteed class,
	// even with a lower request asked for.
	m = parse(t, render(t, []string{"pinning.guaranteed=true", "app.resources.requests.cpu=250m"}))
	for _, d := range []string{"app", "nginx"} {
		p := pod(t, m, "Deployment", named(d))
		for _, c := range append(append([]Container{}, p.InitContainers...), p.Containers...) {
			if !reflect.DeepEqual(c.Resources.Limits, c.Resources.Requests) || c.Resources.Limits["cpu"] == "" {
				t.Errorf("pinning.guaranteed: %s/%s: requests %v, limits %v: not Guaranteed", d, c.Name, c.Resources.Requests, c.Resources.Limits)
			}
		}
	}
}

// Each workload's values reach its own pod, and only its own: resources per
// container, nodeSelector (joined with nodeUnderTest.labels for the pods
// under test), tolerations and affinity (the generator's own affinity with
// the chart's preference for other nodes than the node under test added).
func TestComponentValues(t *testing.T) {
	m := parse(t, render(t, placedSets))
	app, nginx, prom, job := pod(t, m, "Deployment", named("app")), pod(t, m, "Deployment", named("nginx")),
		pod(t, m, "Deployment", named("prometheus")), pod(t, m, "Job", named("openloop-placed"))

	wantResources(t, "app/app", app.Container("app"), q("1", "300Mi", "1Gi"), q("250m", "300Mi", "1Gi"))
	wantResources(t, "app/remove-stale-socket", app.Container("remove-stale-socket"), q("50m", "32Mi", "64Mi"), q("50m", "32Mi", "64Mi"))
	for _, p := range []*PodSpec{app, nginx} {
		wantResources(t, "nginx", p.Container("nginx"), q("2", "128Mi", "64Mi"), q("150m", "128Mi", "64Mi"))
		wantResources(t, "log-exporter", p.Container("log-exporter"), q("150m", "64Mi", "64Mi"), q("150m", "64Mi", "64Mi"))
	}
	wantResources(t, "nginx/nginx-exporter", nginx.Container("nginx-exporter"), q("200m", "48Mi", "64Mi"), q("200m", "48Mi", "64Mi"))
	wantResources(t, "prometheus/prometheus", prom.Container("prometheus"), q("1", "1Gi", "3Gi"), q("100m", "1Gi", "3Gi"))
	wantResources(t, "prometheus/prometheus-auth", prom.Container("prometheus-auth"), q("300m", "64Mi", "64Mi"), q("300m", "64Mi", "64Mi"))
	wantResources(t, "openloop/openloop", job.Container("openloop"), q("2", "2Gi", "512Mi"), q("1500m", "2Gi", "512Mi"))
	wantResources(t, "openloop/plan", job.Container("plan"), q("200m", "96Mi", "64Mi"), q("200m", "96Mi", "64Mi"))

	for name, c := range map[string]struct {
		p            *PodSpec
		nodeSelector map[string]string
		tolerations  []map[string]any
	}{
		"app":        {app, map[string]string{"pool": "app-pool", "uds-lab/role": "under-test"}, []map[string]any{{"key": "dedicated", "operator": "Equal", "value": "app", "effect": "NoSchedule"}}},
		"nginx":      {nginx, map[string]string{"pool": "nginx-pool", "uds-lab/role": "under-test"}, nil},
		"prometheus": {prom, map[string]string{"pool": "monitoring"}, []map[string]any{{"operator": "Exists"}}},
		"openloop":   {job, nil, []map[string]any{{"key": "load", "operator": "Exists", "effect": "NoExecute"}}},
	} {
		if !reflect.DeepEqual(c.p.NodeSelector, c.nodeSelector) {
			t.Errorf("%s's pod: nodeSelector %v, want %v", name, c.p.NodeSelector, c.nodeSelector)
		}
		if !reflect.DeepEqual(c.p.Tolerations, c.tolerations) {
			t.Errorf("%s's pod: tolerations %v, want %v", name, c.p.Tolerations, c.tolerations)
		}
	}
	if app.Affinity != nil || prom.Affinity != nil {
		t.Errorf("affinity where none was set: app %v, prometheus %v", app.Affinity, prom.Affinity)
	}
	anti := nginx.Affinity["podAntiAffinity"].(map[string]any)["preferredDuringSchedulingIgnoredDuringExecution"].([]any)[0].(map[string]any)
	if anti["weight"] != 50 || anti["podAffinityTerm"].(map[string]any)["topologyKey"] != "kubernetes.io/hostname" {
		t.Errorf("nginx's pod: affinity %v, want nginx.affinity's podAntiAffinity", nginx.Affinity)
	}
	// The generator's: load.affinity's preference, then the chart's for
	// nodes other than the node under test.
	prefs, _ := job.Affinity["nodeAffinity"].(map[string]any)["preferredDuringSchedulingIgnoredDuringExecution"].([]any)
	var got []string
	for _, p := range prefs {
		e := p.(map[string]any)["preference"].(map[string]any)["matchExpressions"].([]any)[0].(map[string]any)
		got = append(got, e["key"].(string)+" "+e["operator"].(string))
	}
	if want := []string{"pool In", "uds-lab/role NotIn"}; !reflect.DeepEqual(got, want) {
		t.Errorf("the generator's node preferences %v, want %v (load.affinity's, then off the node under test)", got, want)
	}
}

// A value of the wrong shape is refused by helm lint and helm template
// (values.schema.json), naming the field.
func TestComponentValuesRefused(t *testing.T) {
	for _, c := range []struct {
		sets []string
		want string
	}{
		{[]string{"app.tolerations=oops"}, "/app/tolerations"},
		{[]string{"load.tolerations[0].effect=NoSchedul"}, "/load/tolerations/0/effect"},
		{[]string{"load.tolerations[0].tolerance=1"}, "additional properties 'tolerance'"},
		{[]string{"prometheus.nodeSelector.disk=true"}, "/prometheus/nodeSelector/disk"},
		{[]string{"nginx.affinity.nodeAfinity.x=y"}, "additional properties 'nodeAfinity'"},
		{[]string{"nginx.affinity.podAntiAffinity=near"}, "/nginx/affinity/podAntiAffinity"},
		{[]string{"load.resources.limits.cpu=lots"}, "/load/resources/limits/cpu"},
		{[]string{"app.resources.requests.memory=big"}, "/app/resources/requests/memory"},
		{[]string{"prometheus.authResources.limits.cpu=-1"}, "/prometheus/authResources/limits/cpu"},
		// The shape before Kubernetes' own (cpu, memory and disk at the top).
		{[]string{"app.resources.cpu=2"}, "additional properties 'cpu'"},
		{[]string{"logExporter.resources.limits.disk=1Gi"}, "additional properties 'disk'"},
		{[]string{"nginxExporter.resources.limits=null", "nginxExporter.resources.requests.cpu=1"}, "/nginxExporter/resources"},
	} {
		for _, cmd := range []string{"template", "lint"} {
			args := append([]string{cmd, release, chartDir(t)}, setArgs(c.sets)...)
			out, err := helm(t, args...)
			if err == nil {
				t.Errorf("helm %s %v: passed, want a refusal\n%.300s", cmd, c.sets, out)
			} else if msg := err.Error() + out; !strings.Contains(msg, c.want) {
				t.Errorf("helm %s %v: %v%s; want a message with %q", cmd, c.sets, err, out, c.want)
			}
		}
	}
}
