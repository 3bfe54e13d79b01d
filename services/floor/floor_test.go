package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestBadSettingsAreNamed(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{map[string]string{"FLOOR_TCP_ADDR": "9100"}, []string{"floor", "serve"}, `FLOOR_TCP_ADDR="9100": want host:port or :port`},
		{map[string]string{"FLOOR_SOCKET_MODE": "rw"}, []string{"floor", "serve"}, `FLOOR_SOCKET_MODE="rw": want an octal mode`},
		{map[string]string{}, []string{"floor", "bench"}, "FLOOR_PLAN: the plan.json to run"},
		{map[string]string{}, []string{"floor", "nope"}, `unknown subcommand "nope"`},
	} {
		err := run(context.Background(), tc.args, env(tc.env), &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: error %v, want %q", tc.args, tc.env, err, tc.want)
		}
	}
}

// startServer runs `floor serve` on a free TCP port and a socket in a temp
// folder; returns the two addresses as a plan names them.
func startServer(t *testing.T) (tcp, unix string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	sock := filepath.Join(t.TempDir(), "floor.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"floor", "serve"}, env(map[string]string{"FLOOR_TCP_ADDR": addr, "FLOOR_UNIX_SOCKET": sock}), &bytes.Buffer{})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	cfg := ServeConfig{TCPAddr: addr, UnixSocket: sock}
	for i := 0; ; i++ {
		if err := healthcheck(context.Background(), cfg); err == nil {
			break
		} else if i > 100 {
			t.Fatalf("server never answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "tcp:" + addr, "unix:" + sock
}

func TestEchoReturnsEveryByteAndRefusesAHugeFrame(t *testing.T) {
	tcp, _ := startServer(t)
	c, err := net.Dial("tcp", strings.TrimPrefix(tcp, "tcp:"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, size := range []int{0, 1, 100, 102400, 300000} {
		msg := frame(size)
		reply := make([]byte, len(msg))
		if err := exchange(c, msg, reply); err != nil || !bytes.Equal(msg, reply) {
			t.Fatalf("size %d: err %v, echo equal %v", size, err, bytes.Equal(msg, reply))
		}
	}
	// A length above MaxMessage: the server hangs up rather than allocate it.
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], MaxMessage+1)
	c.Write(hdr[:])
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("after an oversized frame: read %d, %v; want the connection closed", n, err)
	}
}

func TestBenchRunsThePlanAndWritesFloorJSON(t *testing.T) {
	tcp, unix := startServer(t)
	dir := t.TempDir()
	plan := map[string]any{
		"testid": "f1", "settings": map[string]any{"mode": "floor"}, "describe": "3 phases",
		"phases": []Phase{
			{Name: "floor__uds__rtt-100__r1", Transport: "uds", Measure: "rtt", Size: 100, Round: 1, Phase: "measure", Duration: 0.2, Address: unix, Progress: "phase 1/3"},
			{Name: "floor__loopback__rtt-102400__r1", Transport: "loopback", Measure: "rtt", Size: 102400, Round: 1, Phase: "measure", Duration: 0.2, Address: tcp, Progress: "phase 2/3"},
			{Name: "floor__loopback__connect__r1", Transport: "loopback", Measure: "connect", Size: 1, Round: 1, Phase: "measure", Duration: 5, Address: tcp, Progress: "phase 3/3", MaxOps: 50},
		},
	}
	b, _ := json.Marshal(plan)
	path := filepath.Join(dir, "plan.json")
	os.WriteFile(path, b, 0o644)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"floor", "bench"}, env(map[string]string{"FLOOR_PLAN": path}), &out); err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	for _, want := range []string{"uds-lab floor run f1: 3 phases", "phase 2/3", "floor__loopback__connect__r1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	var doc struct {
		StartMs int64    `json:"start_ms"`
		Phases  []Result `json:"phases"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "floor.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Phases) != 3 || doc.StartMs <= 0 {
		t.Fatalf("floor.json: %s", raw)
	}
	last := -1.0
	for _, r := range doc.Phases {
		if r.Ops == 0 || r.Errors != 0 || r.P50us == nil || *r.P50us <= 0 || *r.P99us < *r.P50us || r.OpsPerS <= 0 {
			t.Errorf("%s: %+v", r.Name, r)
		}
		if r.MaxOps > 0 && (r.Ops != r.MaxOps || r.Seconds >= 5) {
			t.Errorf("%s: %d ops in %v s; want it to stop at max_ops %d", r.Name, r.Ops, r.Seconds, r.MaxOps)
		}
		if r.StartOffset < last || r.StartOffset > 10 || (r.MaxOps == 0 && r.Seconds < 0.2) {
			t.Errorf("%s: start %v s, %v s long: want in order, from the run's start, at least the phase", r.Name, r.StartOffset, r.Seconds)
		}
		last = r.StartOffset
	}
	if strings.Contains(string(raw), `"progress"`) {
		t.Errorf("floor.json keeps the progress lines")
	}
}

func TestBenchRefusesABadPlan(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"no phases":   `{"testid":"x","phases":[]}`,
		"bad address": `{"testid":"x","phases":[{"name":"p","measure":"rtt","address":"udp:1"}]}`,
		"bad measure": `{"testid":"x","phases":[{"name":"p","measure":"walk","address":"tcp:a:1"}]}`,
		"not json":    `{`,
	} {
		path := filepath.Join(dir, "plan.json")
		os.WriteFile(path, []byte(body), 0o644)
		if err := run(context.Background(), []string{"floor", "bench"}, env(map[string]string{"FLOOR_PLAN": path}), &bytes.Buffer{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestQuantileIsNearestRank(t *testing.T) {
	ds := make([]time.Duration, 100)
	for i := range ds {
		ds[i] = time.Duration(i+1) * time.Microsecond
	}
	if q := quantile(ds, 0.5); q != 50 {
		t.Errorf("p50 = %v, want 50", q)
	}
	if q := quantile(ds, 0.99); q != 99 {
		t.Errorf("p99 = %v, want 99", q)
	}
	if q := quantile(ds[:1], 0.99); q != 1 {
		t.Errorf("p99 of one = %v, want 1", q)
	}
}
