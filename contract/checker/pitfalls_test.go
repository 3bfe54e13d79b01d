package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rawApp listens on 127.0.0.1 and on a socket with an exact backlog each,
// as an app that hard-codes one; serve (if not nil) answers on both.
type rawApp struct {
	cfg      Config
	tcp, uds *os.File
}

func newRawApp(t *testing.T, backlog int, serve http.Handler) *rawApp {
	t.Helper()
	dir, err := os.MkdirTemp("", "pit")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "app.sock")
	ufd := listenRaw(t, syscall.AF_UNIX, &syscall.SockaddrUnix{Name: sock}, backlog)
	tfd := listenRaw(t, syscall.AF_INET, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}, backlog)
	sa, _ := syscall.Getsockname(tfd)
	a := &rawApp{cfg: testConfig("127.0.0.1:"+strconv.Itoa(sa.(*syscall.SockaddrInet4).Port), sock),
		tcp: os.NewFile(uintptr(tfd), "tcp"), uds: os.NewFile(uintptr(ufd), "unix")}
	t.Cleanup(func() { a.tcp.Close(); a.uds.Close() })
	if serve != nil {
		for _, f := range []*os.File{a.tcp, a.uds} {
			l, err := net.FileListener(f)
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: serve}
			go srv.Serve(l)
			t.Cleanup(func() { srv.Close() })
		}
	}
	return a
}

func TestBacklogClause(t *testing.T) {
	max, err := somaxconn()
	if err != nil || max < 512 {
		t.Skipf("somaxconn %d (%v): the test needs 512", max, err)
	}
	low := newRawApp(t, 10, nil)
	c := backlogClause(low.cfg)
	if c.Pass || c.Status != statusWarn || !strings.Contains(c.Why, "unix "+low.cfg.Socket+" 10") ||
		!strings.Contains(c.Why, "tcp :"+strconv.Itoa(listenerPort(low.cfg))+" 10, ") ||
		!strings.Contains(c.Why, "net.core.somaxconn "+strconv.Itoa(max)) || !strings.Contains(c.Fix, "listen()") {
		t.Errorf("backlog 10: %+v", c)
	}
	ok := newRawApp(t, 512, nil)
	if c := backlogClause(ok.cfg); !c.Pass || c.Status != statusPass || !strings.Contains(c.Why, "tcp :") || c.Fix != "" {
		t.Errorf("backlog 512: %+v", c)
	}
	// At somaxconn's cap, the fix is the sysctl.
	s, w, f := judgeBacklog(ok.cfg, []diagSocket{{Network: "tcp", Port: 8080, Backlog: 16}},
		[]diagSocket{{Network: "unix", Path: "/sock/app.sock", Backlog: 16}}, 16)
	if s != statusWarn || !strings.Contains(w, "somaxconn 16") || !strings.Contains(f, "APP_SOMAXCONN") {
		t.Errorf("capped: %s %s %s", s, w, f)
	}
	if s, _, _ := judgeBacklog(ok.cfg, nil, nil, 4096); s != statusNA {
		t.Errorf("no listeners: %s", s)
	}
}

// clientHandler answers /client as an app that reads the proxy headers
// (honest), ignores them on the socket (an empty RemoteAddr there), or has no
// such route.
func clientHandler(mode string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/client" || mode == "none" {
			http.NotFound(w, r)
			return
		}
		client, _, _ := net.SplitHostPort(r.RemoteAddr)
		if v := r.Header.Get("X-Real-IP"); v != "" && (mode == "honest" || client != "") {
			client = v
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"client": client})
	})
}

func TestClientClause(t *testing.T) {
	for mode, want := range map[string]string{"honest": statusPass, "dropped": statusWarn, "none": statusNA} {
		a := newRawApp(t, 64, clientHandler(mode))
		c := clientClause(newApp(a.cfg))
		if c.Status != want || c.Pass != (want == statusPass) {
			t.Errorf("%s: %+v, want %s", mode, c, want)
		}
		if mode == "dropped" && (!strings.Contains(c.Why, "over the socket the app drops") || !strings.Contains(c.Fix, "X-Forwarded-For")) {
			t.Errorf("dropped: %+v", c)
		}
	}
	if s, _, f := judgeClient(map[string]string{"tcp": "172.18.0.3", "unix": ""}, ""); s != statusWarn || !strings.Contains(f, "proxy_set_header") {
		t.Errorf("ignores both: %s %s", s, f)
	}
}

// testWorker is a worker process of the multi-process app: it accepts up to
// n connections on each listener it inherited (fd 3 TCP, fd 4 the socket)
// and holds them; 0 accepts none.
func testWorker(n string) {
	limit, _ := strconv.Atoi(n)
	for _, fd := range []uintptr{3, 4} {
		l, err := net.FileListener(os.NewFile(fd, "listener"))
		if err != nil {
			os.Exit(3)
		}
		go func() {
			var held []net.Conn
			for len(held) < limit {
				c, err := l.Accept()
				if err != nil {
					return
				}
				held = append(held, c)
			}
			select {}
		}()
	}
	select {}
}

// workerApp: this test binary's own workers on a rawApp's listeners, each
// accepting up to its limit (one taking every connection: 1000, 0, 0).
func workerApp(t *testing.T, limits ...int) *rawApp {
	a := newRawApp(t, 128, nil)
	for _, n := range limits {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "CONTRACT_TEST_WORKER="+strconv.Itoa(n))
		cmd.ExtraFiles = []*os.File{a.tcp, a.uds}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	time.Sleep(200 * time.Millisecond) // the workers are accepting
	return a
}

func spreadOf(t *testing.T, a *rawApp) Clause {
	t.Helper()
	tcp, uds, err := listenersOf(a.cfg)
	if err != nil || len(tcp) != 1 || len(uds) != 1 {
		t.Fatalf("listeners: %v %v %v", tcp, uds, err)
	}
	var shares []share
	for _, l := range newApp(a.cfg).both() {
		ls := tcp
		if l.name == "unix" {
			ls = uds
		}
		s, err := measureShare(a.cfg, l, ls)
		if err != nil {
			t.Fatal(err)
		}
		shares = append(shares, s)
	}
	var c Clause
	c.judge(judgeSpread(shares))
	return c
}

// Read from /proc as ss -p does: one worker taking every connection fails;
// three taking 8 each pass. (This process is their parent and holds the
// listeners too, as a master would: it is left out.)
func TestSpreadOverWorkers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("reads other processes' descriptors: needs root or one user")
	}
	hog := spreadOf(t, workerApp(t, 1000, 0, 0))
	if hog.Pass || !strings.Contains(hog.Why, "24 of 24 accepted over 3 processes: 24, 0, 0") || !strings.Contains(hog.Fix, "SO_REUSEPORT") {
		t.Errorf("one worker takes all: %+v", hog)
	}
	fair := spreadOf(t, workerApp(t, 8, 8, 8))
	if !fair.Pass || !strings.Contains(fair.Why, "over 3 processes: 8, 8, 8") {
		t.Errorf("8 each: %+v", fair)
	}
}

func TestJudgeSpread(t *testing.T) {
	one := []share{{listener: "tcp", workers: []proc{{PID: 1}}, accepted: map[int]int{1: 24}, total: 24},
		{listener: "unix", workers: []proc{{PID: 1}}, accepted: map[int]int{1: 24}, total: 24}}
	if s, why, _ := judgeSpread(one); s != statusPass || !strings.Contains(why, "one process") {
		t.Errorf("one process: %s %s", s, why)
	}
	two := []proc{{PID: 7}, {PID: 8}}
	skew := []share{{listener: "tcp", workers: two, accepted: map[int]int{7: 12, 8: 12}, total: 24},
		{listener: "unix", workers: two, accepted: map[int]int{7: 23, 8: 1}, total: 24}}
	if s, why, _ := judgeSpread(skew); s != statusWarn || !strings.Contains(why, "over 90% on unix") {
		t.Errorf("unix skewed: %s %s", s, why)
	}
	// Sync workers each hold one connection: an even spread.
	sync := []share{{listener: "unix", workers: two, accepted: map[int]int{7: 1, 8: 1}, total: 2}}
	if s, _, _ := judgeSpread(sync); s != statusPass {
		t.Errorf("sync workers: %s", s)
	}
}

func TestWorkersLeaveOutTheirMaster(t *testing.T) {
	ps := []proc{
		{PID: 1, PPID: 0, Sockets: map[uint64]bool{100: true}}, // master: holds the listener
		{PID: 7, PPID: 1, Sockets: map[uint64]bool{100: true, 200: true}},
		{PID: 8, PPID: 1, Sockets: map[uint64]bool{100: true}},
		{PID: 9, PPID: 1, Sockets: map[uint64]bool{300: true}}, // neither
	}
	got := workers(ps, map[uint64]bool{100: true}, map[int]int{7: 1})
	if len(got) != 2 || got[0].PID != 7 || got[1].PID != 8 {
		t.Errorf("workers = %v, want 7 and 8", got)
	}
	if comm, ppid := parseStat("42 (gunicorn: worker (x)) S 7 42 42 0"); comm != "gunicorn: worker (x)" || ppid != 7 {
		t.Errorf("parseStat: %q %d", comm, ppid)
	}
	if n, ok := socketInode("socket:[12345]"); !ok || n != 12345 {
		t.Errorf("socketInode: %d %v", n, ok)
	}
	if _, ok := socketInode("pipe:[1]"); ok {
		t.Error("a pipe taken for a socket")
	}
}

// A backlog of 1 and an app slow to accept: the socket refuses a burst where
// TCP makes it wait (the failure envelope), and the row says so.
func TestEnvelope(t *testing.T) {
	a := newRawApp(t, 1, nil)
	for _, f := range []*os.File{a.tcp, a.uds} {
		l, err := net.FileListener(f)
		if err != nil {
			t.Fatal(err)
		}
		go func() { // accepts one connection each 20 ms, answers and closes it
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					buf := make([]byte, 4096)
					_, _ = c.Read(buf)
					_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"))
				}()
				time.Sleep(20 * time.Millisecond)
			}
		}()
		t.Cleanup(func() { l.Close() })
	}
	levels, burstFor := envelopeLevels, envelopeBurst
	envelopeLevels, envelopeBurst = []int{1, 32}, 500*time.Millisecond
	defer func() { envelopeLevels, envelopeBurst = levels, burstFor }()
	c := envelopeClause(a.cfg, newApp(a.cfg), true)
	var uds, tcp level
	for _, lv := range c.Levels {
		if lv.Concurrency == 32 && lv.Listener == "unix" {
			uds = lv
		}
		if lv.Concurrency == 32 && lv.Listener == "tcp" {
			tcp = lv
		}
	}
	if uds.Refused == 0 || tcp.Refused != 0 || tcp.OK == 0 || c.Status != statusInfo ||
		!strings.Contains(c.Why, "The socket refused from 32 in flight") {
		t.Errorf("envelope: unix %+v tcp %+v: %s %s", uds, tcp, c.Status, c.Why)
	}
	if s, _, f := judgeEnvelope(c.Levels, "/ping", false); s != statusWarn || !strings.Contains(f, "backlog") {
		t.Errorf("judged at the app's backlog: %s %s", s, f)
	}
	if s, why, _ := judgeEnvelope([]level{{Listener: "tcp", Concurrency: 4, Sent: 9, OK: 9}, {Listener: "unix", Concurrency: 4, Sent: 9, OK: 9}}, "/ping", false); s != statusPass || !strings.Contains(why, "Neither refused") {
		t.Errorf("no refusal: %s %s", s, why)
	}
}

// An app that answers each request after 20 ms, with room in its queues: no
// burst is refused and each level's p99 (of the answered requests, in ms) is
// the delay and a little more, in the level and in the row's words.
func TestEnvelopeP99IsTheAppsDelay(t *testing.T) {
	a := newRawApp(t, 64, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
	}))
	levels, burstFor := envelopeLevels, envelopeBurst
	envelopeLevels, envelopeBurst = []int{2}, 200*time.Millisecond
	defer func() { envelopeLevels, envelopeBurst = levels, burstFor }()
	c := envelopeClause(a.cfg, newApp(a.cfg), false)
	if len(c.Levels) != 2 || c.Status != statusPass {
		t.Fatalf("envelope: %+v", c)
	}
	for _, lv := range c.Levels {
		if lv.OK < 4 || lv.Refused != 0 || lv.P99Ms < 20 || lv.P99Ms > 60 {
			t.Errorf("%s: %+v, want p99 20 to 60 ms", lv.Listener, lv)
		}
		if row := fmt.Sprintf("%s 2: 0%% refused at connect, p99 %s", lv.Listener, ms(lv.P99Ms)); !strings.Contains(c.Why, row) {
			t.Errorf("row %q not in %s", row, c.Why)
		}
	}
	if ms(20.5) != "20.5 ms" || ms(1500) != "1.50 s" {
		t.Errorf("ms: %s %s", ms(20.5), ms(1500))
	}
}
