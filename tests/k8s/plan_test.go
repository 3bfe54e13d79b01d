package k8s

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"uds-lab/tests/internal/lab"
)

// podFS lays out what a container of pod would see under root: each
// ConfigMap it mounts (its items, or every key) and each emptyDir (shared:
// the same folder for every container of the pod).
func podFS(t *testing.T, m Manifests, pod *PodSpec, c *Container, root string) {
	t.Helper()
	for _, mt := range c.VolumeMounts {
		v := pod.Volume(mt.Name)
		if v == nil {
			t.Fatalf("container %s mounts %s, which the pod does not have", c.Name, mt.Name)
		}
		dir := filepath.Join(root, mt.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if v.ConfigMap == nil {
			continue
		}
		cm := m.must(t, "ConfigMap", v.ConfigMap.Name)
		files := map[string]string{}
		if len(v.ConfigMap.Items) == 0 {
			for k := range cm.Data {
				files[k] = k
			}
		}
		for _, it := range v.ConfigMap.Items {
			files[it.Key] = it.Path
		}
		for key, p := range files {
			f := filepath.Join(dir, p)
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, []byte(cm.Data[key]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The generator Job's plan, as the Job would make it: loadgen/plan.py (from
// the chart's ConfigMap) with the plan container's environment and mounts,
// run here under a folder standing for the pod's file system. The plan lands
// where openloop's PLAN points, in the folder both share; openloop takes it;
// it drives the chart's paths, and every URL in it is a Service and port of
// the chart.
func TestJobPlan(t *testing.T) {
	python := lab.Tool(t, "python3")
	for _, v := range variants {
		m := parse(t, render(t, v.sets))
		var job *Object
		for _, o := range m {
			if o.Kind == "Job" {
				job = o
			}
		}
		if job == nil {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			pod := &job.Spec.Template.Spec
			plan, gen := pod.Container("plan"), pod.Container("openloop")
			if plan == nil || gen == nil {
				t.Fatalf("Job %s: no plan init container or no openloop container", job.Metadata.Name)
			}
			root := t.TempDir()
			podFS(t, m, pod, plan, root)
			podFS(t, m, pod, gen, root)
			local := func(p string) string {
				if strings.HasPrefix(p, "/") {
					return filepath.Join(root, p)
				}
				return p
			}
			if len(plan.Command) < 2 || plan.Command[0] != "python3" {
				t.Fatalf("the plan container runs %q", plan.Command)
			}
			env := plan.EnvMap()
			cmd := exec.Command(python, local(plan.Command[1]))
			cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root}
			for k, val := range env {
				if k == "CATALOGUE" || k == "RESULTS" {
					val = local(val)
				}
				cmd.Env = append(cmd.Env, k+"="+val)
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("plan.py with the Job's settings: %v\n%s", err, out)
			}
			b, err := os.ReadFile(local(gen.EnvMap()["PLAN"]))
			if err != nil {
				t.Fatalf("openloop's PLAN: %v (plan.py wrote it elsewhere, or the two containers do not share it)", err)
			}
			var doc struct {
				Testid   string `json:"testid"`
				Settings struct {
					Paths []string `json:"paths"`
				} `json:"settings"`
				URLs map[string]string `json:"urls"`
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Testid != env["TESTID"] {
				t.Errorf("plan's testid %q, the Job's %q", doc.Testid, env["TESTID"])
			}
			got := append([]string{}, doc.Settings.Paths...)
			sort.Strings(got)
			want := strings.Split(env["PATHS"], ",")
			sort.Strings(want)
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("the plan drives %v; the Job asked for %v", got, want)
			}
			for path, u := range doc.URLs {
				pu, err := url.Parse(u)
				if err != nil {
					t.Fatal(err)
				}
				host, port, _ := net.SplitHostPort(pu.Host)
				svc := m.Get("Service", host)
				ok := false
				if svc != nil {
					for _, p := range svc.Spec.Ports {
						ok = ok || strconv.Itoa(p.Port) == port
					}
				}
				if !ok {
					t.Errorf("path %s: the generator would ask %s, which no Service of the chart answers", path, u)
				}
			}
			// The generator takes it: openloop check reads the plan the Job
			// wrote as the Job's container would (its PLAN, its segment), and
			// sends nothing.
			check := exec.Command(openloopBinary(t), "check")
			check.Env = []string{"PLAN=" + local(gen.EnvMap()["PLAN"]), "OPENLOOP_SEGMENT=0/1"}
			if out, err := check.CombinedOutput(); err != nil {
				t.Fatalf("openloop check on the Job's plan: %v\n%s", err, out)
			}
			var phases struct {
				Phases []any `json:"phases"`
			}
			if err := json.Unmarshal(b, &phases); err != nil || len(phases.Phases) == 0 {
				t.Errorf("the Job's plan has no phases (%v)", err)
			}
			// Where the socket cannot go, the path is not driven.
			cat := lab.ReadCatalogue(t)
			for _, p := range doc.Settings.Paths {
				if cat.Paths[p].Nginx == "nginx" && cat.Paths[p].Hop == "socket" {
					t.Errorf("the plan drives %s: the socket from the nginx in its own pod, which Kubernetes cannot give", p)
				}
			}
		})
	}
}

// A run is its Job alone: rendered with --show-only templates/load-job.yaml
// (docs/kubernetes.md) it brings its NetworkPolicy, and every ConfigMap and
// Secret it mounts is one the installed chart already has; and enabling a run
// changes nothing in the pods under test (their templates, checksums
// included, stay the same: no restart between runs).
func TestRunIsTheJobAlone(t *testing.T) {
	sets := []string{"load.enabled=true", "load.testid=r7"}
	args := append([]string{"template", release, chartDir(t), "--namespace", namespace, "--show-only", "templates/load-job.yaml"}, setArgs(sets)...)
	out, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm template --show-only templates/load-job.yaml: %v", err)
	}
	run := parse(t, out)
	installed := parse(t, render(t, nil))
	job := run.must(t, "Job", named("openloop-r7"))
	run.must(t, "NetworkPolicy", release+"-openloop")
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && installed.Get("ConfigMap", v.ConfigMap.Name) == nil {
			t.Errorf("the Job mounts ConfigMap %s, which the installed chart lacks", v.ConfigMap.Name)
		}
		if v.Secret != nil && installed.Get("Secret", v.Secret.SecretName) == nil {
			t.Errorf("the Job mounts Secret %s, which the installed chart lacks", v.Secret.SecretName)
		}
	}
	withRun := render(t, sets)
	for _, d := range []string{"app", "nginx", "prometheus"} {
		a, b := docOf(t, render(t, nil), "Deployment", named(d)), docOf(t, withRun, "Deployment", named(d))
		if a != b {
			t.Errorf("enabling a run changes Deployment %s (its pods would restart)", d)
		}
	}
}

// docOf returns the text of one object of a rendering.
func docOf(t *testing.T, text, kind, name string) string {
	t.Helper()
	for _, doc := range strings.Split(text, "\n---") {
		if strings.Contains(doc, "\nkind: "+kind+"\n") && strings.Contains(doc, "\n  name: "+name+"\n") {
			return doc
		}
	}
	t.Fatalf("no %s %s in the rendering", kind, name)
	return ""
}

// openloopBinary is loadgen/openloop built from this checkout, once.
func openloopBinary(t *testing.T) string {
	t.Helper()
	openloopOnce.Do(func() {
		dir, err := os.MkdirTemp("", "openloop-")
		if err != nil {
			openloopErr = err
			return
		}
		openloopPath = filepath.Join(dir, "openloop")
		cmd := exec.Command("go", "build", "-o", openloopPath, ".")
		cmd.Dir = lab.Path(t, "loadgen", "openloop")
		if out, err := cmd.CombinedOutput(); err != nil {
			openloopErr = fmt.Errorf("go build loadgen/openloop: %v\n%s", err, out)
		}
	})
	if openloopErr != nil {
		t.Fatal(openloopErr)
	}
	return openloopPath
}

var (
	openloopOnce sync.Once
	openloopPath string
	openloopErr  error
)

// Every generator pod of a run waits for one start instant: load.startAt is
// the OPENLOOP_START_AT of the Job's one pod template, and openloop takes it
// (openloop check reads its settings); a run of one pod without it has none
// (the pod starts when it comes up).
func TestJobPodsShareOneStartInstant(t *testing.T) {
	for _, c := range []struct {
		sets []string
		want string
	}{
		{[]string{"load.enabled=true", "load.testid=t1", "load.pods=3", "load.startAt=1795941070750"}, "1795941070750"},
		{[]string{"load.enabled=true", "load.testid=t1"}, ""},
	} {
		job := parse(t, render(t, c.sets)).must(t, "Job", named("openloop-t1"))
		env := job.Spec.Template.Spec.Container("openloop").EnvMap()
		if got, ok := env["OPENLOOP_START_AT"]; got != c.want || ok != (c.want != "") {
			t.Errorf("%v: the generator's OPENLOOP_START_AT %q (given: %v), want %q", c.sets, got, ok, c.want)
		}
		if c.want == "" {
			continue
		}
		plan := filepath.Join(t.TempDir(), "plan.json")
		doc := `{"testid":"t","settings":{"mode":"rate","rate":1},"phases":[{"name":"ping__tcp__r1","path":"tcp","duration_s":1,"url":"http://x/"}]}`
		if err := os.WriteFile(plan, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		check := exec.Command(openloopBinary(t), "check")
		check.Env = []string{"PLAN=" + plan, "OPENLOOP_START_AT=" + env["OPENLOOP_START_AT"]}
		if out, err := check.CombinedOutput(); err != nil {
			t.Errorf("openloop check with the Job's OPENLOOP_START_AT: %v\n%s", err, out)
		}
	}
}
