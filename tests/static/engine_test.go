package static

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"uds-lab/tests/internal/lab"
)

// proc is a process started under a name of the test's choosing (a copy of
// sleep), reaped as soon as it exits so that "exited" reads true.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startAs(t *testing.T, path string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(path, args...), done: make(chan struct{})}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	case <-time.After(time.Second):
		return false
	}
}

func writePid(t *testing.T, path, pid string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(pid+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func clean(t *testing.T, run string) string {
	t.Helper()
	cmd := exec.Command("bash", lab.Path(t, "tests/e2e/engine.sh"), "clean")
	cmd.Env = append(os.Environ(), "UDS_LAB_DOCKER_RUN="+run)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("engine.sh clean: %v\n%s", err, out)
	}
	return string(out)
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

// A killed engine's pid files name pids the kernel may have given to other
// programs; dockerd would take them for itself still running and wait on a
// containerd that is not there. engine.sh start clears them first.
func TestEngineClearsWhatAKilledEngineLeft(t *testing.T) {
	bin := t.TempDir()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"containerd", "other"} {
		if err := os.WriteFile(filepath.Join(bin, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A "dockerd" that runs its "containerd" as a child, as the real one does.
	script := "#!/bin/sh\n\"$(dirname \"$0\")/containerd\" 60 &\necho $! >\"$1\"\nwait\n"
	if err := os.WriteFile(filepath.Join(bin, "dockerd"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	t.Run("pids now another program's, or none", func(t *testing.T) {
		run := t.TempDir()
		dockerPid, containerdPid := filepath.Join(run, "docker.pid"), filepath.Join(run, "docker/containerd/containerd.pid")
		other := startAs(t, filepath.Join(bin, "other"), "60")
		writePid(t, dockerPid, strconv.Itoa(other.cmd.Process.Pid))
		writePid(t, containerdPid, "")
		out := clean(t, run)
		if exists(dockerPid) || exists(containerdPid) {
			t.Errorf("a pid file left in place:\n%s", out)
		}
		if other.exited() {
			t.Error("the program that now holds the pid was stopped; only the file should go")
		}
	})

	t.Run("containerd its dockerd left", func(t *testing.T) {
		run := t.TempDir()
		containerdPid := filepath.Join(run, "docker/containerd/containerd.pid")
		orphan := startAs(t, filepath.Join(bin, "containerd"), "60") // its parent is this test, not a dockerd
		writePid(t, containerdPid, strconv.Itoa(orphan.cmd.Process.Pid))
		out := clean(t, run)
		if !orphan.exited() {
			t.Errorf("the orphaned containerd still runs:\n%s", out)
		}
		if exists(containerdPid) {
			t.Errorf("its pid file left in place:\n%s", out)
		}
	})

	t.Run("a running engine", func(t *testing.T) {
		run := t.TempDir()
		dockerPid, containerdPid := filepath.Join(run, "docker.pid"), filepath.Join(run, "docker/containerd/containerd.pid")
		if err := os.MkdirAll(filepath.Dir(containerdPid), 0o755); err != nil {
			t.Fatal(err)
		}
		engine := startAs(t, filepath.Join(bin, "dockerd"), containerdPid)
		writePid(t, dockerPid, strconv.Itoa(engine.cmd.Process.Pid))
		deadline := time.Now().Add(5 * time.Second)
		for b, _ := os.ReadFile(containerdPid); strings.TrimSpace(string(b)) == ""; b, _ = os.ReadFile(containerdPid) {
			if time.Now().After(deadline) {
				t.Fatal("the stand-in dockerd wrote no containerd pid")
			}
			time.Sleep(20 * time.Millisecond)
		}
		b, _ := os.ReadFile(containerdPid)
		child, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		t.Cleanup(func() { _ = exec.Command("kill", strconv.Itoa(child)).Run() })
		out := clean(t, run)
		if !exists(dockerPid) || !exists(containerdPid) {
			t.Errorf("a running engine's pid file removed:\n%s", out)
		}
		if engine.exited() || exec.Command("kill", "-0", strconv.Itoa(child)).Run() != nil {
			t.Errorf("a running engine's process stopped:\n%s", out)
		}
	})
}
