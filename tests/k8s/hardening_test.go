package k8s

import (
	"fmt"
	"slices"
	"testing"
)

// The kinds whose pod template the test reads (spec.template.spec); a
// workload of another kind fails until the test reads it too.
var podKinds = []string{"Deployment", "Job", "StatefulSet", "DaemonSet"}

// hardeningProblems says which rendered container or init container is not
// locked down as every one of the lab's is: all capabilities dropped and none
// added, not privileged, no privilege escalation, a read-only root file
// system, run as non-root, and the runtime's default seccomp profile (the
// container's setting, else its pod's). kube-score and kubeconform pass a
// chart that drops only NET_RAW, so this is checked here. Empty: none.
func hardeningProblems(m Manifests) []string {
	var bad []string
	for _, o := range m {
		switch {
		case slices.Contains([]string{"Pod", "CronJob", "ReplicaSet", "ReplicationController"}, o.Kind):
			bad = append(bad, fmt.Sprintf("%s %s: a pod this test does not read (add its kind to podKinds)", o.Kind, o.Metadata.Name))
			continue
		case !slices.Contains(podKinds, o.Kind):
			continue
		}
		pod := &o.Spec.Template.Spec
		if len(pod.Containers) == 0 {
			bad = append(bad, fmt.Sprintf("%s %s: no containers read", o.Kind, o.Metadata.Name))
		}
		for _, c := range append(append([]Container{}, pod.InitContainers...), pod.Containers...) {
			where := fmt.Sprintf("%s %s, container %s", o.Kind, o.Metadata.Name, c.Name)
			sc := c.SecurityContext
			if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) || len(sc.Capabilities.Add) > 0 {
				bad = append(bad, where+": does not drop ALL capabilities (and add none)")
			}
			if sc.Privileged != nil && *sc.Privileged {
				bad = append(bad, where+": privileged")
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				bad = append(bad, where+": allowPrivilegeEscalation is not false")
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				bad = append(bad, where+": the root file system is not read-only")
			}
			nonRoot := sc.RunAsNonRoot
			if nonRoot == nil {
				nonRoot = pod.SecurityContext.RunAsNonRoot
			}
			if nonRoot == nil || !*nonRoot || (sc.RunAsUser != nil && *sc.RunAsUser == 0) {
				bad = append(bad, where+": may run as root (runAsNonRoot not true, or runAsUser 0)")
			}
			seccomp := sc.SeccompProfile
			if seccomp == nil {
				seccomp = pod.SecurityContext.SeccompProfile
			}
			if seccomp == nil || seccomp.Type != "RuntimeDefault" {
				bad = append(bad, where+": seccomp profile is not RuntimeDefault")
			}
		}
	}
	return bad
}

func TestEveryContainerIsLockedDown(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			m := parse(t, render(t, v.sets))
			n := 0
			for _, o := range m {
				if slices.Contains(podKinds, o.Kind) {
					n += len(o.Spec.Template.Spec.Containers) + len(o.Spec.Template.Spec.InitContainers)
				}
			}
			if n < 5 {
				t.Fatalf("read %d containers: the test reads too little of the chart", n)
			}
			for _, p := range hardeningProblems(m) {
				t.Error(p)
			}
		})
	}
}

// The check above fails on each loosening, in any container, init containers included.
func TestHardeningMutationsAreCaught(t *testing.T) {
	text := render(t, []string{"load.enabled=true", "load.testid=t1"})
	yes, no, root := true, false, int64(0)
	mutations := map[string]func(m Manifests){
		"nginx drops NET_RAW only": func(m Manifests) {
			m.Get("Deployment", named("app")).Spec.Template.Spec.Container("nginx").SecurityContext.Capabilities.Drop = []string{"NET_RAW"}
		},
		"the app adds NET_ADMIN": func(m Manifests) {
			m.Get("Deployment", named("app")).Spec.Template.Spec.Container("app").SecurityContext.Capabilities.Add = []string{"NET_ADMIN"}
		},
		"the log exporter (an init container) keeps its capabilities": func(m Manifests) {
			m.Get("Deployment", named("nginx")).Spec.Template.Spec.Container("log-exporter").SecurityContext.Capabilities = nil
		},
		"the Job's container writes its root file system": func(m Manifests) {
			c := &m.Get("Job", named("openloop-t1")).Spec.Template.Spec.Containers[0]
			c.SecurityContext.ReadOnlyRootFilesystem = &no
		},
		"Prometheus may escalate": func(m Manifests) {
			c := &m.Get("Deployment", named("prometheus")).Spec.Template.Spec.Containers[0]
			c.SecurityContext.AllowPrivilegeEscalation = &yes
		},
		"the app runs as root": func(m Manifests) {
			c := m.Get("Deployment", named("app")).Spec.Template.Spec.Container("app")
			c.SecurityContext.RunAsUser, c.SecurityContext.RunAsNonRoot = &root, nil
			m.Get("Deployment", named("app")).Spec.Template.Spec.SecurityContext.RunAsNonRoot = nil
		},
		"nginx unconfined": func(m Manifests) {
			pod := &m.Get("Deployment", named("nginx")).Spec.Template.Spec
			pod.Container("nginx").SecurityContext.SeccompProfile = &SeccompProfile{Type: "Unconfined"}
		},
		"privileged": func(m Manifests) {
			m.Get("Deployment", named("nginx")).Spec.Template.Spec.Container("nginx").SecurityContext.Privileged = &yes
		},
	}
	for name, mutate := range mutations {
		m := parse(t, text)
		if p := hardeningProblems(m); len(p) != 0 {
			t.Fatalf("the chart as it is: %v", p)
		}
		mutate(m)
		if len(hardeningProblems(m)) == 0 {
			t.Errorf("mutation %q: not caught", name)
		}
	}
}
