package k8s

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"testing"
)

// sidecarProblems says what is wrong with the app's pod (Deployment app) as
// the lab needs it: the socket's folder (not the file) an emptyDir that the
// app and its nginx sidecar both mount where the socket is; the socket in
// nginx's group with group read and write; a stale socket removed before the
// app starts; a readiness probe on the sidecar that asks the app through
// nginx on both listeners (the kubelet cannot dial a socket); nginx started
// only once its log exporter's FIFO exists. Empty: none.
func sidecarProblems(m Manifests) []string {
	var bad []string
	d := m.Get("Deployment", named("app"))
	if d == nil {
		return []string{"no Deployment app"}
	}
	pod := &d.Spec.Template.Spec
	app, nginx := pod.Container("app"), pod.Container("nginx")
	if app == nil || nginx == nil {
		return []string{"the app's pod has no app or no nginx container"}
	}
	socket := app.EnvMap()["APP_UNIX_SOCKET"]
	if socket == "" || nginx.EnvMap()["APP_UNIX_SOCKET"] != socket {
		bad = append(bad, fmt.Sprintf("the app's socket is %q, nginx dials %q", socket, nginx.EnvMap()["APP_UNIX_SOCKET"]))
	}
	dir := path.Dir(socket)
	// The volume the app's socket folder is.
	var vol string
	for _, mt := range app.VolumeMounts {
		if mt.MountPath == dir {
			vol = mt.Name
			if mt.SubPath != "" {
				bad = append(bad, "the app mounts its socket's folder through a subPath")
			}
		}
	}
	if v := pod.Volume(vol); vol == "" || v == nil || v.EmptyDir == nil {
		bad = append(bad, fmt.Sprintf("the app's socket folder %s is not an emptyDir of the pod", dir))
	}
	if mt := nginx.Mount(vol); vol == "" || mt == nil || mt.MountPath != dir || mt.SubPath != "" {
		bad = append(bad, fmt.Sprintf("nginx does not mount the app's socket folder (volume %q) at %s as a folder", vol, dir))
	}
	// The socket's group is nginx's, with read and write for it.
	gid := app.EnvMap()["APP_SOCKET_GID"]
	mode, err := strconv.ParseUint(app.EnvMap()["APP_SOCKET_MODE"], 8, 32)
	if err != nil || mode&0o060 != 0o060 || mode&0o007 != 0 {
		bad = append(bad, fmt.Sprintf("APP_SOCKET_MODE=%q: want group read and write, nothing for others", app.EnvMap()["APP_SOCKET_MODE"]))
	}
	if g := nginx.SecurityContext.RunAsGroup; g == nil || strconv.FormatInt(*g, 10) != gid {
		bad = append(bad, fmt.Sprintf("the socket's group is %q; nginx runs in group %v", gid, g))
	}
	if g := pod.SecurityContext.FSGroup; g == nil || strconv.FormatInt(*g, 10) != gid {
		bad = append(bad, fmt.Sprintf("the pod's fsGroup (the socket folder's group) is %v, the socket's %q", g, gid))
	}
	// A stale socket is removed before the app starts.
	removed := false
	for _, c := range pod.InitContainers {
		if c.RestartPolicy != "Always" && strings.Contains(strings.Join(c.Command, " "), "rm -f "+socket) {
			if mt := c.Mount(vol); mt != nil && mt.MountPath == dir {
				removed = true
			}
		}
	}
	if !removed {
		bad = append(bad, "no init container removes a stale "+socket+" from the socket folder")
	}
	// The sidecar's readiness: nginx, and the app on both listeners through it.
	p := nginx.ReadinessProbe
	if p == nil || p.Exec == nil || strings.Join(p.Exec.Command, " ") != "sh /lab/healthcheck.sh" {
		bad = append(bad, "nginx's readiness probe is not nginx/healthcheck.sh (the app on both listeners, through nginx)")
	} else if mt := nginx.Mount("nginx-lab"); mt == nil || mt.MountPath != "/lab" {
		bad = append(bad, "nginx does not mount nginx/healthcheck.sh at /lab")
	} else if v := pod.Volume("nginx-lab"); v == nil || v.ConfigMap == nil || len(v.ConfigMap.Items) != 1 || v.ConfigMap.Items[0].Path != "healthcheck.sh" {
		bad = append(bad, "the volume nginx-lab does not hold healthcheck.sh")
	} else if cm := m.Get("ConfigMap", v.ConfigMap.Name); cm == nil || !strings.Contains(cm.Data[v.ConfigMap.Items[0].Key], "uds") {
		bad = append(bad, "the readiness probe's script does not ask the app's socket")
	}
	// nginx opens the exporter's FIFO at start: the exporter is a native
	// sidecar (an init container that keeps running) with a startup probe.
	if e := pod.Container("log-exporter"); e == nil || e.RestartPolicy != "Always" || e.StartupProbe == nil {
		bad = append(bad, "the log exporter is not a native sidecar with a startup probe (nginx would start before its FIFO)")
	}
	return bad
}

func TestSidecarSharesTheSocketFolder(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			for _, p := range sidecarProblems(parse(t, render(t, v.sets))) {
				t.Error(p)
			}
		})
	}
}

// The check above fails on the broken sidecars users would meet.
func TestSidecarMutationsAreCaught(t *testing.T) {
	text := render(t, nil)
	mutations := map[string]func(p *PodSpec){
		"nginx stops mounting the socket folder": func(p *PodSpec) {
			c := p.Container("nginx")
			var keep []Mount
			for _, m := range c.VolumeMounts {
				if m.Name != "sock" {
					keep = append(keep, m)
				}
			}
			c.VolumeMounts = keep
		},
		"nginx mounts the socket file, not its folder": func(p *PodSpec) {
			c := p.Container("nginx")
			m := c.Mount("sock")
			m.MountPath, m.SubPath = "/sock/app.sock", "app.sock"
		},
		"nginx loses its readiness probe": func(p *PodSpec) { p.Container("nginx").ReadinessProbe = nil },
		"the readiness probe asks nginx alone": func(p *PodSpec) {
			p.Container("nginx").ReadinessProbe = &Probe{HTTPGet: &HTTPGet{Path: "/healthz"}}
		},
		"the socket folder is a hostPath": func(p *PodSpec) { p.Volume("sock").EmptyDir = nil },
		"nginx leaves the socket's group": func(p *PodSpec) { g := int64(65534); p.Container("nginx").SecurityContext.RunAsGroup = &g },
		"no stale socket removal":         func(p *PodSpec) { p.InitContainers = p.InitContainers[1:] },
		"the exporter is an ordinary init container": func(p *PodSpec) {
			p.Container("log-exporter").RestartPolicy = ""
		},
	}
	for name, mutate := range mutations {
		m := parse(t, text)
		if len(sidecarProblems(m)) != 0 {
			t.Fatalf("the chart as it is: %v", sidecarProblems(m))
		}
		mutate(&m.Get("Deployment", named("app")).Spec.Template.Spec)
		if len(sidecarProblems(m)) == 0 {
			t.Errorf("mutation %q: not caught", name)
		}
	}
}

// Who holds what (docs/design.md, "Inputs"): the Prometheus password only in
// Prometheus's pod, never in the app's, nginx's or the generator's (nothing
// writes into Prometheus); the log FIFO's volume not in the app's container.
func TestInputs(t *testing.T) {
	m := parse(t, render(t, []string{"load.enabled=true", "load.testid=t1"}))
	secret := release + "-prometheus-auth"
	for _, o := range m {
		pod := o.Spec.Template.Spec
		for _, v := range pod.Volumes {
			holds := v.Secret != nil && v.Secret.SecretName == secret
			if holds && o.Metadata.Name != named("prometheus") {
				t.Errorf("%s %s mounts Prometheus's password", o.Kind, o.Metadata.Name)
			}
		}
		for _, c := range append(append([]Container{}, pod.InitContainers...), pod.Containers...) {
			for _, e := range c.Env {
				if strings.Contains(e.Value, "PASSWORD") && e.Name != "PASSWORD_FILE" {
					t.Errorf("%s %s: container %s has %s in its environment", o.Kind, o.Metadata.Name, c.Name, e.Name)
				}
			}
		}
	}
	app := m.must(t, "Deployment", named("app")).Spec.Template.Spec.Container("app")
	if app.Mount("log") != nil {
		t.Error("the app's container mounts the log exporter's FIFO folder")
	}
	if m.Get("Job", named("openloop-t1")) == nil {
		t.Fatal("no Job openloop-t1 with load.enabled")
	}
}

// In each nginx's pod, nginx's access log reaches its exporter: the FIFO
// nginx writes (NGINX_ACCESS_LOG) is the one the exporter makes
// (LOG_EXPORTER_PIPE), in a volume both mount at the same place and the app
// does not; the exporter runs in nginx's group (the FIFO is 0660) and starts
// first; its catalogue is the chart's.
func TestLogExporterWiring(t *testing.T) {
	m := parse(t, render(t, nil))
	for deploy := range chartNginx {
		pod := &m.must(t, "Deployment", named(deploy)).Spec.Template.Spec
		nginx, exp := pod.Container("nginx"), pod.Container("log-exporter")
		if exp == nil || exp.RestartPolicy != "Always" || exp.StartupProbe == nil {
			t.Errorf("%s: no log exporter started before nginx (a native sidecar with a startup probe)", deploy)
			continue
		}
		pipe := exp.EnvMap()["LOG_EXPORTER_PIPE"]
		if f := strings.Fields(nginx.EnvMap()["NGINX_ACCESS_LOG"]); len(f) == 0 || f[0] != pipe {
			t.Errorf("%s: nginx logs to %q, the exporter reads %q", deploy, nginx.EnvMap()["NGINX_ACCESS_LOG"], pipe)
		}
		var vol string
		for _, mt := range exp.VolumeMounts {
			if strings.HasPrefix(pipe, mt.MountPath+"/") {
				vol = mt.Name
				if nm := nginx.Mount(mt.Name); nm == nil || nm.MountPath != mt.MountPath {
					t.Errorf("%s: nginx does not mount the FIFO's volume %s at %s", deploy, mt.Name, mt.MountPath)
				}
			}
		}
		if v := pod.Volume(vol); vol == "" || v == nil || v.EmptyDir == nil {
			t.Errorf("%s: the FIFO %s is not in an emptyDir of the pod", deploy, pipe)
		}
		if a := pod.Container("app"); a != nil && a.Mount(vol) != nil {
			t.Errorf("%s: the app mounts the FIFO's volume", deploy)
		}
		if g, n := exp.SecurityContext.RunAsGroup, nginx.SecurityContext.RunAsGroup; g == nil || n == nil || *g != *n {
			t.Errorf("%s: the exporter runs in group %v, nginx in %v: nginx could not write the FIFO (0660)", deploy, g, n)
		}
		cat := exp.EnvMap()["LOG_EXPORTER_CATALOGUE"]
		ok := false
		for _, mt := range exp.VolumeMounts {
			if v := pod.Volume(mt.Name); v != nil && v.ConfigMap != nil && v.ConfigMap.Name == release+"-catalogue" &&
				cat == mt.MountPath+"/catalogue.json" {
				ok = true
			}
		}
		if !ok {
			t.Errorf("%s: the exporter's catalogue %q is not the chart's ConfigMap", deploy, cat)
		}
	}
}
