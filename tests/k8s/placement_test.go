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
		if name == "nginx" { // the chart's preference away from the app's pod alone (TestNginxApartFromApp)
			if p.NodeSelector != nil || p.Tolerations != nil || len(p.Affinity) != 1 || len(p.Affinity["podAntiAffinity"].(map[string]any)) != 1 {
				t.Errorf("nginx's pod: placement by default: nodeSelector %v, tolerations %v, affinity %v", p.NodeSelector, p.Tolerations, p.Affinity)
			}
			continue
		}
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
	// nginx's: nginx.affinity's podAntiAffinity, then the chart's away from the app's pod.
	antis := nginx.Affinity["podAntiAffinity"].(map[string]any)["preferredDuringSchedulingIgnoredDuringExecution"].([]any)
	anti := antis[0].(map[string]any)
	if len(antis) != 2 || anti["weight"] != 50 || anti["podAffinityTerm"].(map[string]any)["topologyKey"] != "kubernetes.io/hostname" ||
		antis[1].(map[string]any)["weight"] != 100 {
		t.Errorf("nginx's pod: affinity %v, want nginx.affinity's podAntiAffinity, then the chart's", nginx.Affinity)
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
		{[]string{"nginx.apartFromApp=always"}, "/nginx/apartFromApp"},
		{[]string{"nginx.apartFromApp=true"}, "/nginx/apartFromApp"},
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

// The nginx pod (tcp's, across the network) keeps away from the app's pod:
// a podAntiAffinity on the node (kubernetes.io/hostname) whose selector
// matches the app's pod's labels and not its own, preferred by default (a
// single node still runs both), required with nginx.apartFromApp=required,
// none with off; the app's pod has none.
func TestNginxApartFromApp(t *testing.T) {
	for _, c := range []struct {
		value, key string // key: the podAntiAffinity list the term is in; "": none
	}{
		{"", "preferredDuringSchedulingIgnoredDuringExecution"},
		{"preferred", "preferredDuringSchedulingIgnoredDuringExecution"},
		{"required", "requiredDuringSchedulingIgnoredDuringExecution"},
		{"off", ""},
	} {
		var sets []string
		if c.value != "" {
			sets = []string{"nginx.apartFromApp=" + c.value}
		}
		m := parse(t, render(t, sets))
		app, nginx := m.must(t, "Deployment", named("app")), m.must(t, "Deployment", named("nginx"))
		if app.Spec.Template.Spec.Affinity != nil {
			t.Errorf("%v: the app's pod has an affinity: %v", sets, app.Spec.Template.Spec.Affinity)
		}
		if c.key == "" {
			if nginx.Spec.Template.Spec.Affinity != nil {
				t.Errorf("%v: nginx's pod has an affinity: %v", sets, nginx.Spec.Template.Spec.Affinity)
			}
			continue
		}
		anti, _ := nginx.Spec.Template.Spec.Affinity["podAntiAffinity"].(map[string]any)
		terms, _ := anti[c.key].([]any)
		if len(anti) != 1 || len(terms) != 1 {
			t.Errorf("%v: nginx's podAntiAffinity %v; want one term in %s", sets, anti, c.key)
			continue
		}
		term := terms[0].(map[string]any)
		if c.key == "preferredDuringSchedulingIgnoredDuringExecution" {
			if term["weight"] != 100 {
				t.Errorf("%v: weight %v, want 100", sets, term["weight"])
			}
			term = term["podAffinityTerm"].(map[string]any)
		}
		if term["topologyKey"] != "kubernetes.io/hostname" {
			t.Errorf("%v: topologyKey %v, want kubernetes.io/hostname (another node)", sets, term["topologyKey"])
		}
		sel := term["labelSelector"].(map[string]any)["matchLabels"].(map[string]any)
		matches := func(labels map[string]string) bool {
			for k, v := range sel {
				if labels[k] != v {
					return false
				}
			}
			return len(sel) > 0
		}
		if !matches(app.Spec.Template.Metadata.Labels) || matches(nginx.Spec.Template.Metadata.Labels) {
			t.Errorf("%v: the term selects %v: want the app's pod (%v), not nginx's own", sets, sel, app.Spec.Template.Metadata.Labels)
		}
		if sel["app.kubernetes.io/instance"] != release {
			t.Errorf("%v: the term selects %v: another release's app pods too", sets, sel)
		}
	}
}
