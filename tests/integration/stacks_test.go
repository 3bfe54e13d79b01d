package integration

// The reference stacks of stacks/, each a folder with its stack.env, each run
// on this host from its folder as its Dockerfile runs it (its exec-form
// ENTRYPOINT and CMD, its ENV and STOPSIGNAL) with the settings make up
// STACK=<name> gives it, behind both nginx rendered from the project's
// templates in the stack's protocol. Debian's packages of each stack.env's
// STACK_TEST_PACKAGES run them here, as in the stand-in images
// (scripts/test-deps.sh installs them). No stack is named here: a new folder
// is tested as it is added.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"uds-lab/tests/internal/lab"
)

// appUID is the app's user in compose (APP_UID); as root the stacks run as it,
// with nginx workers' group, so the socket is reached through its group.
const appUID = 10001

// imageDir is where every stack's Dockerfile copies its folder (and where
// .env's APP_FASTCGI_SCRIPT points): here, the folder itself.
const imageDir = "/app/"

// stackCase is one stack to run: its stack.env, and how its image runs it.
type stackCase struct {
	name    string // its folder under stacks/
	variant string // NAME=value: its STACK_POOLS_WITH applied, for the test's name
	stack   lab.Stack
	// The lab's settings as make up STACK=<name> leaves them: .env's, the
	// stack's settings (and variant) over them.
	settings map[string]string
	env      []string       // its image's ENV, then its settings (and variant), then PATH
	argv     []string       // its image's ENTRYPOINT and CMD, run from its folder
	stop     syscall.Signal // its graceful stop (its image's STOPSIGNAL)
	pools    bool           // whether its -ka paths reuse connections
}

// stackCases: one case per folder of stacks/, and one more for each stack
// with a setting under which it pools after all (STACK_POOLS_WITH).
func stackCases(t *testing.T) []stackCase {
	aliases := versionedNames(t)
	var out []stackCase
	stacks := lab.ReadStacks(t)
	names := make([]string, 0, len(stacks))
	for name := range stacks {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		s := stacks[name]
		if s.Env["STACK_TEST_BED"] == "static" {
			continue // no registry here to build it: tests/static checks it (stacks/README.md)
		}
		img := readImage(t, lab.Path(t, s.Dir), aliases)
		add := func(variant map[string]string, pools bool) {
			c := stackCase{name: name, stack: s, argv: img.argv, stop: img.stop, pools: pools,
				settings: lab.Env(t)}
			// The app's container gets every setting of its stack (compose's
			// env_file, .lab/<project>/up.env), after its image's ENV.
			c.env = append(c.env, img.env...)
			for _, set := range []map[string]string{s.Settings, variant} {
				for k, v := range set {
					c.settings[k] = v
					c.env = append(c.env, k+"="+v)
				}
			}
			for k, v := range variant {
				c.variant = k + "=" + v
			}
			c.env = append(c.env, "PATH="+stackPath(aliases))
			out = append(out, c)
		}
		add(nil, s.Pools)
		if len(s.PoolsWith) > 0 {
			add(s.PoolsWith, true)
		}
	}
	return out
}

// image is how a stack's Dockerfile runs it (its last stage).
type image struct {
	argv []string // ENTRYPOINT then CMD (exec form), imageDir read as the folder
	env  []string // ENV, NAME=value
	stop syscall.Signal
}

// readImage reads a stack's Dockerfile: its exec-form ENTRYPOINT and CMD,
// with imageDir read as the folder and the program found on PATH (or among
// aliases) unless it is the folder's; its ENV; its STOPSIGNAL (SIGTERM,
// Docker's, by default). What it cannot read as Docker would, it refuses.
func readImage(t *testing.T, dir, aliases string) image {
	t.Helper()
	path := filepath.Join(dir, "Dockerfile")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	local := func(s string) string {
		if rest, ok := strings.CutPrefix(s, imageDir); ok {
			return filepath.Join(dir, rest)
		}
		return s
	}
	var img image
	var entrypoint, cmd []string
	sc := bufio.NewScanner(f)
	var line string
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") { // also within a continued instruction
			continue
		}
		if cont, ok := strings.CutSuffix(text, "\\"); ok {
			line += cont + " "
			continue
		}
		line += text
		keyword := strings.Fields(line)[0]
		rest := strings.TrimSpace(line[len(keyword):])
		line = ""
		execForm := func() []string {
			var argv []string
			if err := json.Unmarshal([]byte(rest), &argv); err != nil {
				t.Fatalf("%s: %s %s: the test runs the exec form only (a JSON array)", path, keyword, rest)
			}
			return argv
		}
		switch strings.ToUpper(keyword) {
		case "FROM": // a new stage: what it runs is its own
			entrypoint, cmd, img = nil, nil, image{}
		case "ENTRYPOINT":
			entrypoint, cmd = execForm(), nil // Docker: an ENTRYPOINT resets CMD
		case "CMD":
			cmd = execForm()
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || strings.ContainsAny(v, "$\"'\\") {
					t.Fatalf("%s: ENV %s: the test reads NAME=value with plain values only", path, rest)
				}
				img.env = append(img.env, k+"="+local(v))
			}
		case "STOPSIGNAL":
			img.stop = signalNamed(t, path, rest)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, a := range append(entrypoint, cmd...) {
		img.argv = append(img.argv, local(a))
	}
	if len(img.argv) == 0 {
		t.Fatalf("%s: no ENTRYPOINT or CMD: the test runs the stack as its image does", path)
	}
	if img.stop == 0 {
		img.stop = syscall.SIGTERM
	}
	// The program: the folder's own, or found here by its name on the
	// stacks' PATH (the image's path to it is the image's).
	if p := img.argv[0]; !strings.HasPrefix(p, dir+string(filepath.Separator)) {
		img.argv[0] = lookPath(t, filepath.Base(p), stackPath(aliases))
	}
	return img
}

// imagePath is the PATH of the images the stacks run in (Debian's, and the
// official images'): the stacks find their programs there first, as in their
// image, then on this machine's PATH (where a python3 of pyenv's, say, may
// come first and see none of Debian's packages), then among the aliases.
const imagePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func stackPath(aliases string) string {
	return strings.Join([]string{imagePath, os.Getenv("PATH"), aliases}, string(os.PathListSeparator))
}

// lookPath finds a program on path, as exec.LookPath on PATH.
func lookPath(t *testing.T, name, path string) string {
	t.Helper()
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	t.Fatalf("%s not found on %s: run scripts/test-deps.sh (make test does) or install it", name, path)
	return ""
}

// signalNamed reads STOPSIGNAL's value: SIGNAME, NAME or a number.
func signalNamed(t *testing.T, path, s string) syscall.Signal {
	t.Helper()
	if n, err := strconv.Atoi(s); err == nil {
		return syscall.Signal(n)
	}
	signals := map[string]syscall.Signal{"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT,
		"KILL": syscall.SIGKILL, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "TERM": syscall.SIGTERM,
		"WINCH": syscall.SIGWINCH}
	sig, ok := signals[strings.TrimPrefix(strings.ToUpper(s), "SIG")]
	if !ok {
		t.Fatalf("%s: STOPSIGNAL %s: not a signal the test knows", path, s)
	}
	return sig
}

// Debian names some programs by their version where the official images do
// not (php-fpm8.2; the stand-in images link it by the plain name): such a
// program in /usr/bin or /usr/sbin, NAME then a dotted version.
var versioned = regexp.MustCompile(`^(.*[^0-9.])[0-9]+(\.[0-9]+)+$`)

// versionedNames returns a folder, last on the stacks' PATH, that gives each
// of Debian's versioned programs its plain name where PATH has none (the
// last in name order where there are several), as the stand-in images do: a
// stack's entrypoint runs the program by the official image's name.
func versionedNames(t *testing.T) string {
	t.Helper()
	dir := lab.ShortTempDir(t)
	if err := os.Chmod(dir, 0o755); err != nil { // the stacks may run as the app's user
		t.Fatal(err)
	}
	for _, bin := range []string{"/usr/bin", "/usr/sbin"} {
		entries, _ := os.ReadDir(bin) // in name order
		for _, e := range entries {
			m := versioned.FindStringSubmatch(e.Name())
			if m == nil {
				continue
			}
			if _, err := exec.LookPath(m[1]); err == nil {
				continue
			}
			link := filepath.Join(dir, m[1])
			_ = os.Remove(link)
			if err := os.Symlink(filepath.Join(bin, e.Name()), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dir
}

// relay stands between nginx and a listener of the app and counts the
// connections nginx opens: each one it accepts it copies to a connection of its
// own to the app, and closes both when either side closes. So an app that
// closes a pooled connection makes nginx open a new one, counted here, as the
// Go app counts its accepted connections. The stacks export no such count.
type relay struct{ accepted atomic.Int64 }

func startRelay(t *testing.T, front net.Listener, network, backend string) *relay {
	r := &relay{}
	go func() {
		for {
			c, err := front.Accept()
			if err != nil {
				return
			}
			r.accepted.Add(1)
			go func() {
				defer c.Close()
				b, err := net.Dial(network, backend)
				if err != nil {
					return
				}
				defer b.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	t.Cleanup(func() { front.Close() })
	return r
}

func TestStacks(t *testing.T) {
	cat := lab.ReadCatalogue(t)
	for _, sc := range stackCases(t) {
		name := sc.name // e.g. gunicorn, and gunicorn/GUNICORN_WORKER_CLASS=gthread
		if sc.variant != "" {
			name += "/" + sc.variant
		}
		t.Run(name, func(t *testing.T) { testStack(t, cat, sc) })
	}
}

// appUser is who the stacks run as here: as root, the app's user (appUID) with
// nginx workers' group (nogroup, as nginx's workers run as nobody:nogroup), in
// a socket folder as compose's volume has it (theirs, 0750); otherwise this
// process's user and group.
type appUser struct {
	root    bool
	cred    *syscall.Credential // nil: this process's
	gid     int                 // the group the socket gets
	sockDir string
}

func newAppUser(t *testing.T, dir string) appUser {
	t.Helper()
	u := appUser{root: os.Geteuid() == 0, gid: os.Getegid(), sockDir: filepath.Join(dir, "sock")}
	// The folder above only needs to be passable, like / in a container.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(u.sockDir, 0o750); err != nil {
		t.Fatal(err)
	}
	if u.root {
		grp, err := user.LookupGroup("nogroup")
		if err != nil {
			t.Fatal(err)
		}
		u.gid, _ = strconv.Atoi(grp.Gid)
		if err := os.Chown(u.sockDir, appUID, u.gid); err != nil {
			t.Fatal(err)
		}
		u.cred = &syscall.Credential{Uid: appUID, Gid: uint32(u.gid), Groups: []uint32{}}
		reachable(t, lab.Root(t))
	}
	return u
}

// reachable: the stacks, run as the app's user, read their code in the
// checkout: every folder above it must let others pass (a checkout under
// a 0700 folder, mktemp -d's or /root, gave "can't chdir" from each stack).
func reachable(t *testing.T, root string) {
	t.Helper()
	for d := root; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			t.Fatalf("the stacks run as uid %d, which cannot pass %s (mode %04o) to reach the checkout at %s: "+
				"run the tests from a checkout whose folders others may pass (chmod o+x %s)", appUID, d, fi.Mode().Perm(), root, d)
		}
		if d == filepath.Dir(d) {
			return
		}
	}
}

func testStack(t *testing.T, cat lab.Catalogue, sc stackCase) {
	stack := sc.stack
	dir := lab.ShortTempDir(t)
	u := newAppUser(t, dir)
	root, cred, gid, sockDir := u.root, u.cred, u.gid, u.sockDir
	var nginxUser, socketGID string
	if root {
		nginxUser, socketGID = "user nobody nogroup;", strconv.Itoa(gid)
	}
	socket := filepath.Join(sockDir, "app.sock")
	appPort := lab.FreePort(t)
	env := append(append(os.Environ(), sc.env...),
		fmt.Sprintf("APP_TCP_ADDR=127.0.0.1:%d", appPort),
		"APP_UNIX_SOCKET="+socket,
		"APP_SOCKET_MODE="+sc.settings["APP_SOCKET_MODE"],
		"APP_SOCKET_GID="+socketGID,
	)

	// nginx reaches the app through counting relays: TCP, and a socket of
	// their own that nginx's workers may use (the app's own is checked below).
	relayDir := filepath.Join(dir, "relay")
	if err := os.Mkdir(relayDir, 0o755); err != nil {
		t.Fatal(err)
	}
	tcpFront, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	relaySocket := filepath.Join(relayDir, "relay.sock")
	unixFront, err := net.Listen("unix", relaySocket)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(relaySocket, 0o666); err != nil {
		t.Fatal(err)
	}
	relays := map[string]*relay{
		"tcp":  startRelay(t, tcpFront, "tcp", fmt.Sprintf("127.0.0.1:%d", appPort)),
		"unix": startRelay(t, unixFront, "unix", socket),
	}

	// Both nginx of the catalogue, from the templates, in the stack's protocol,
	// with the lab's settings as make up STACK=<name> leaves them (a stack
	// may set nginx's idle pool, NGINX_UPSTREAM_KEEPALIVE); the front
	// controller (APP_FASTCGI_SCRIPT) is the image's, so the folder's here.
	fastcgiScript := sc.settings["APP_FASTCGI_SCRIPT"]
	if rest, ok := strings.CutPrefix(fastcgiScript, imageDir); ok {
		fastcgiScript = filepath.Join(lab.Path(t, stack.Dir), rest)
	}
	urls := map[string]string{}
	ports := map[string]int{}
	var nginxes []*exec.Cmd
	for name, suffix := range map[string]string{"nginx": "", "nginx-lo": "-lo"} {
		runDir := filepath.Join(dir, name)
		if err := os.Mkdir(runDir, 0o755); err != nil {
			t.Fatal(err)
		}
		ports[name] = lab.FreePort(t)
		vars := map[string]string{
			"APP_PROTOCOL":             stack.Protocol,
			"APP_FASTCGI_SCRIPT":       fastcgiScript,
			"NGINX_UPSTREAM_KEEPALIVE": sc.settings["NGINX_UPSTREAM_KEEPALIVE"],
			"NGINX_WORKER_PROCESSES":   "1",
			"NGINX_RUN_DIR":            runDir,
			"NGINX_LISTEN_PORT":        strconv.Itoa(ports[name]),
			"NGINX_STATUS_PORT":        strconv.Itoa(lab.FreePort(t)),
			"NGINX_PATH_SUFFIX":        suffix,
			"APP_TCP_UPSTREAM":         tcpFront.Addr().String(),
			"APP_UNIX_SOCKET":          relaySocket,
			"NGINX_ACCESS_LOG":         "off",
			"NGINX_WORKER_CONNECTIONS": sc.settings["NGINX_WORKER_CONNECTIONS"],
			"NGINX_MAX_IN_FLIGHT":      sc.settings["NGINX_MAX_IN_FLIGHT"],
		}
		nginxes = append(nginxes, runNginx(t, name, runDir, vars, nil, nginxUser))
		urls[name] = fmt.Sprintf("http://127.0.0.1:%d", ports[name])
		waitFor(t, name, func() error { _, err := get(http.DefaultClient, urls[name]+"/healthz"); return err })
	}

	// nginx's healthcheck decides when the app is ready: not before it answers.
	health := func(name string) error {
		cmd := exec.Command("sh", lab.Path(t, "nginx", "healthcheck.sh"))
		cmd.Env = append(os.Environ(), fmt.Sprintf("NGINX_LISTEN_PORT=%d", ports[name]))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := health("nginx"); err == nil || !strings.Contains(err.Error(), "tcp listener") {
		t.Fatalf("nginx's healthcheck before the app started: %v, want a failure naming the tcp listener", err)
	}

	t.Logf("%s, as its image runs it: %q (stop: %v)", stack.Dir, sc.argv, sc.stop)
	app := startAs(t, sc.name, env, cred, sc.argv...)
	for name := range urls {
		waitFor(t, name+"'s healthcheck (the app on both listeners)", func() error { return health(name) })
	}

	t.Run("socket permissions", func(t *testing.T) { checkSocket(t, socket, sc.settings["APP_SOCKET_MODE"], root, gid) })

	// A kept TCP connection answers at once: an app whose connections keep
	// Nagle's algorithm and write an answer in two parts waits for the
	// client's delayed ACK (about 40 ms) on every request but a connection's
	// first, which the pooled TCP paths would measure instead of TCP.
	if stack.Protocol == "http" {
		t.Run("kept TCP connection without delayed answers", func(t *testing.T) {
			kept := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			var times []time.Duration
			for i := 0; i < 11; i++ {
				start := time.Now()
				if _, err := get(kept, fmt.Sprintf("http://127.0.0.1:%d/ping", appPort)); err != nil {
					t.Fatal(err)
				}
				if i > 0 { // the first opens the connection
					times = append(times, time.Since(start))
				}
			}
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			if median := times[len(times)/2]; median > 20*time.Millisecond {
				t.Errorf("/ping on a kept TCP connection: median %v over %d requests, want under 20 ms (TCP_NODELAY unset: Nagle waits for the delayed ACK)", median, len(times))
			}
		})
	}

	// Every path of the catalogue reaches the app, new connection or pooled
	// as the path says and the stack allows.
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	const n = 20
	for _, path := range cat.Order {
		p := cat.Paths[path]
		base := urls[p.Nginx] + "/" + path
		// Warm the pool first so a keepalive path starts with its connection open.
		if _, err := get(client, base+"/ping"); err != nil {
			t.Fatalf("/%s/ping: %v", path, err)
		}
		before := relays[p.Listener].accepted.Load()
		for i := 0; i < n; i++ {
			body, err := get(client, base+"/ping")
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(string(body)) != `{"message":"pong"}` {
				t.Fatalf("/%s/ping: body %q", path, body)
			}
		}
		accepted := relays[p.Listener].accepted.Load() - before
		want := "one per request"
		ok := accepted == n
		if p.Pooled && sc.pools {
			want, ok = "pooled: at most 1 (one nginx worker)", accepted <= 1
		}
		if !ok {
			t.Errorf("/%s/: %d new connections to the %s listener for %d requests, want %s", path, accepted, p.Listener, n, want)
		}
		t.Logf("/%s/: %d requests, %d connections to the %s listener", path, n, accepted, p.Listener)
		checkRoutes(t, cat, stack, base)
	}

	// A burst on the pooled paths leaves the app able to take new connections:
	// PHP-FPM gives each connection nginx keeps a child, so with as many idle
	// pooled connections as children (NGINX_UPSTREAM_KEEPALIVE too high for
	// PHP_FPM_CHILDREN) the new-connection paths would wait for a child that
	// never comes free (here: no answer at all, until nginx's 30 s timeout).
	t.Run("new connections after a burst on the pooled paths", func(t *testing.T) {
		quick := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
		errs := make(chan error, 16)
		for i := 0; i < 16; i++ {
			go func() {
				var err error
				for j := 0; j < 10 && err == nil; j++ {
					_, err = get(quick, urls["nginx"]+[]string{"/tcp-ka", "/uds-ka"}[i%2]+"/sleep/10")
				}
				errs <- err
			}()
		}
		for i := 0; i < 16; i++ {
			if err := <-errs; err != nil {
				t.Fatalf("16 clients on /tcp-ka/ and /uds-ka/: %v", err)
			}
		}
		for _, path := range []string{"/tcp", "/uds"} {
			if _, err := get(quick, urls["nginx"]+path+"/ping"); err != nil {
				t.Errorf("%s/ping after the burst: %v", path, err)
			}
		}
	})

	// A graceful stop, after nginx's as compose stops them (nginx depends on
	// the app): the stack exits 0 and removes its socket. (With nginx still
	// holding pooled connections PHP-FPM waits process_control_timeout for
	// the children they hold.)
	for _, n := range nginxes {
		_ = n.Process.Signal(syscall.SIGQUIT)
		_ = n.Wait()
	}
	stopGracefully(t, app, sc.stop)
	if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket %s left behind after a graceful stop: %v", socket, err)
	}
	// Nor a worker: the stack's process group is empty once it has exited.
	waitFor(t, "no process of the stack left after its graceful stop", func() error {
		if err := syscall.Kill(-app.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("its process group %d still has a process (kill 0: %v)", app.Process.Pid, err)
		}
		return nil
	})
}

// checkRoutes asks a path for each route: the Go app's answers and JSON errors,
// and a 404 for each workload the catalogue says the stack lacks. The Go app
// passes it too (TestRoutesThroughEachPath), so the stacks answer as it does.
func checkRoutes(t *testing.T, cat lab.Catalogue, stack lab.Stack, base string) {
	t.Helper()
	body, err := get(http.DefaultClient, base+"/bytes/1000")
	if err != nil || len(body) != 1000 {
		t.Fatalf("%s/bytes/1000: %d bytes, %v", base, len(body), err)
	}
	for i, b := range body {
		if b != byte(i%255+1) {
			t.Fatalf("%s/bytes/1000: byte %d is %d, want %d (the Go app's pattern)", base, i, b, i%255+1)
		}
	}
	if body, err := get(http.DefaultClient, base+"/sleep/5"); err != nil || strings.TrimSpace(string(body)) != `{"slept_ms":5}` {
		t.Fatalf("%s/sleep/5: %q, %v", base, body, err)
	}
	// The Go app's /cpu: SHA-256 iterated over a 32-byte state of zeros.
	var state [sha256.Size]byte
	for i := 0; i < 10; i++ {
		state = sha256.Sum256(state[:])
	}
	want := fmt.Sprintf(`{"digest":"%s","iterations":10}`, hex.EncodeToString(state[:]))
	if body, err := get(http.DefaultClient, base+"/cpu/10"); err != nil || strings.TrimSpace(string(body)) != want {
		t.Fatalf("%s/cpu/10: %q, %v; want %s", base, body, err, want)
	}
	for _, route := range []string{"/healthz", "/readyz"} {
		if _, err := get(http.DefaultClient, base+route); err != nil {
			t.Fatal(err)
		}
	}
	wantJSONError(t, base+"/bytes/-1", http.StatusBadRequest)
	wantJSONError(t, base+"/bytes/abc", http.StatusBadRequest)
	wantJSONError(t, base+"/bytes/99999999999999999999", http.StatusBadRequest)
	wantJSONError(t, base+"/sleep/10001", http.StatusBadRequest)
	wantJSONError(t, base+"/cpu/0", http.StatusBadRequest)
	wantJSONError(t, base+"/no-such-route", http.StatusNotFound)
	// Exact routes, as gin's: no empty parameter, no trailing slash.
	wantJSONError(t, base+"/bytes/", http.StatusNotFound)
	wantJSONError(t, base+"/ping/", http.StatusNotFound)
	for _, w := range stack.Lacks {
		wantJSONError(t, base+cat.Workloads[w].Route, http.StatusNotFound)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/ping", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST %s/ping: %s, want 405", base, resp.Status)
	}
}

// checkSocket: the socket lets nginx's group in and nobody else, as the
// lab's settings ask (APP_SOCKET_MODE, the app's user and nginx's group).
func checkSocket(t *testing.T, socket, socketMode string, root bool, gid int) {
	st, err := os.Stat(socket)
	if err != nil {
		t.Fatal(err)
	}
	mode, _ := strconv.ParseUint(socketMode, 8, 32)
	if got := st.Mode().Perm(); uint64(got) != mode || st.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket mode %v, want a socket with %#o (APP_SOCKET_MODE)", st.Mode(), mode)
	}
	sys := st.Sys().(*syscall.Stat_t)
	if int(sys.Gid) != gid {
		t.Errorf("socket group %d, want %d (nginx workers')", sys.Gid, gid)
	}
	if !root {
		return
	}
	if sys.Uid != appUID {
		t.Errorf("socket owner %d, want the app's user %d", sys.Uid, appUID)
	}
	// curl as nginx's workers connects; as a user outside the group it cannot
	// (exit 7: could not connect). Over FastCGI curl's HTTP gets no answer,
	// but connecting is what is checked.
	connect := func(uid, gid uint32) int {
		cmd := exec.Command(lab.Tool(t, "curl"), "-s", "-o", "/dev/null", "--max-time", "2", "--unix-socket", socket, "http://app/healthz")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	if code := connect(65534, uint32(gid)); code == 7 {
		t.Errorf("nginx's user (nobody, group %d) cannot connect to the socket", gid)
	}
	if code := connect(65533, 65533); code != 7 {
		t.Errorf("a user outside nginx's group reached the socket (curl exit %d, want 7)", code)
	}
}

// startAs starts a stack as cred (nil: this process's user) for the length of
// the test, in a process group of its own; its output goes to a log file it
// may write (PHP-FPM reopens its stderr by path, /proc/self/fd/2). The test
// stops it itself, or SIGKILLs its group at the end: a master killed alone
// leaves its workers running (PHP-FPM's children, uvicorn's spawned workers).
func startAs(t *testing.T, name string, env []string, cred *syscall.Credential, argv ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	out, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		if err := out.Chown(int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		killGroup(cmd)
		if cmd.ProcessState == nil {
			_ = cmd.Wait()
		}
		if t.Failed() {
			log, _ := os.ReadFile(out.Name())
			t.Logf("%s output:\n%s", name, log)
		}
	})
	return cmd
}

// nginx's healthcheck (nginx/healthcheck.sh) with the lab's Go app: it passes
// on both nginx, reaching the app's two listeners (its /healthz counted on
// each), leaves no access-log line (it is no path), and fails naming the
// listener once the app is gone.
func TestNginxHealthcheck(t *testing.T) {
	s := startStack(t)
	scraper := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	healthz := func() map[string]float64 {
		mf, err := lab.Metrics(scraper, s.appTCP+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, l := range []string{"tcp", "unix"} {
			out[l], _ = lab.Value(mf, "app_http_requests_total", map[string]string{"listener": l, "route": "/healthz", "code": "200"})
		}
		return out
	}
	logged := func() float64 {
		mf, err := lab.Metrics(scraper, s.logExp+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		if f := mf["nginx_location_requests_total"]; f != nil {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
		return sum
	}
	health := func(url string) (string, error) {
		cmd := exec.Command("sh", lab.Path(t, "nginx", "healthcheck.sh"))
		cmd.Env = append(os.Environ(), "NGINX_LISTEN_PORT="+url[strings.LastIndex(url, ":")+1:])
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	before, linesBefore := healthz(), logged()
	for name, url := range s.urls {
		if out, err := health(url); err != nil {
			t.Errorf("%s's healthcheck with the app up: %v: %s", name, err, out)
		}
	}
	after := healthz()
	for _, l := range []string{"tcp", "unix"} {
		if d := after[l] - before[l]; d != float64(len(s.urls)) {
			t.Errorf("the app's %s listener answered %v /healthz for %d healthchecks, want one each", l, d, len(s.urls))
		}
	}
	time.Sleep(300 * time.Millisecond) // the access log is UDP
	if d := logged() - linesBefore; d != 0 {
		t.Errorf("the healthchecks left %v access-log lines, want none", d)
	}
	if err := s.app.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = s.app.Process.Wait()
	if out, err := health(s.nginxURL); err == nil || !strings.Contains(out, "tcp listener") {
		t.Errorf("nginx's healthcheck with the app down: %v %q, want a failure naming the tcp listener", err, out)
	}
}

// A bad setting stops each stack at start with a message naming it, before
// it listens anywhere (as the Go app's config.go does); the socket's mode
// follows the lab's one rule (contract/socket-modes.json: the Go app, the
// minimal app and the contract checker are held to the same modes).
func TestStacksRefuseBadSettings(t *testing.T) {
	var rule struct{ Keep, Break []string }
	b, err := os.ReadFile(lab.Path(t, "contract", "socket-modes.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rule); err != nil {
		t.Fatal(err)
	}
	type setting struct{ name, value string }
	bad := []setting{{"APP_TCP_ADDR", "localhost"}}
	for _, m := range rule.Break {
		bad = append(bad, setting{"APP_SOCKET_MODE", m})
	}
	for _, sc := range stackCases(t) {
		if sc.variant != "" {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel() // mostly waiting for interpreters to start
			run := func(s setting) (string, error) {
				u := newAppUser(t, lab.ShortTempDir(t))
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, sc.argv[0], sc.argv[1:]...)
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: u.cred, Setpgid: true}
				cmd.Cancel = func() error { killGroup(cmd); return nil }
				// The bad setting last: it wins over the image's ENV.
				cmd.Env = append(append(os.Environ(), sc.env...), fmt.Sprintf("APP_TCP_ADDR=127.0.0.1:%d", lab.FreePort(t)),
					"APP_UNIX_SOCKET="+filepath.Join(u.sockDir, "app.sock"), s.name+"="+s.value)
				out, err := cmd.CombinedOutput()
				if _, serr := os.Stat(filepath.Join(u.sockDir, "app.sock")); serr == nil {
					t.Errorf("%s=%s: the socket was created before the refusal", s.name, s.value)
				}
				return string(out), err
			}
			for _, s := range bad {
				out, err := run(s)
				if err == nil || !strings.Contains(out, s.name+`="`+s.value+`"`) {
					t.Errorf("%s=%s: %v, output %q: want a refusal at start naming the setting", s.name, s.value, err, out)
				}
			}
			// The modes the rule keeps start the stack, the socket made with them.
			for _, m := range rule.Keep {
				u := newAppUser(t, lab.ShortTempDir(t))
				env := append(append(os.Environ(), sc.env...), fmt.Sprintf("APP_TCP_ADDR=127.0.0.1:%d", lab.FreePort(t)),
					"APP_UNIX_SOCKET="+filepath.Join(u.sockDir, "app.sock"), "APP_SOCKET_MODE="+m)
				app := startAs(t, sc.name, env, u.cred, sc.argv...)
				want, _ := strconv.ParseUint(strings.TrimPrefix(m, "0o"), 8, 32)
				waitFor(t, "the socket with mode "+m, func() error {
					st, err := os.Stat(filepath.Join(u.sockDir, "app.sock"))
					if err != nil {
						return err
					}
					if uint64(st.Mode().Perm()) != want {
						return fmt.Errorf("mode %v, want %#o", st.Mode().Perm(), want)
					}
					return nil
				})
				killGroup(app)
				_ = app.Wait()
			}
		})
	}
}

// A crash leaves the socket file behind with nothing listening on it: each
// stack starts over it (removes it and listens anew, stacks/README.md's
// "stale socket at start"), so a restarted container serves again, and its
// graceful stop then removes the socket it made (puma's own binder would
// leave it: it removes only a path that did not exist when it bound).
func TestStacksStartOverStaleSocket(t *testing.T) {
	for _, sc := range stackCases(t) {
		if sc.variant != "" {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			u := newAppUser(t, lab.ShortTempDir(t))
			socket := filepath.Join(u.sockDir, "app.sock")
			dead, err := net.Listen("unix", socket)
			if err != nil {
				t.Fatal(err)
			}
			dead.(*net.UnixListener).SetUnlinkOnClose(false)
			dead.Close()
			if _, err := net.Dial("unix", socket); err == nil {
				t.Fatal("the stale socket answers")
			}
			env := append(append(os.Environ(), sc.env...), fmt.Sprintf("APP_TCP_ADDR=127.0.0.1:%d", lab.FreePort(t)),
				"APP_UNIX_SOCKET="+socket)
			app := startAs(t, sc.name, env, u.cred, sc.argv...)
			waitFor(t, "the stack listening on the socket a crash left", func() error {
				c, err := net.Dial("unix", socket)
				if err == nil {
					c.Close()
				}
				return err
			})
			// Stopped once it answers there: a listener's socket can exist
			// before its workers have started (granian's master binds it, and
			// a worker still starting when the stop comes is killed, exit 1).
			if sc.stack.Protocol == "http" {
				c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
					DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
						return (&net.Dialer{}).DialContext(ctx, "unix", socket)
					}}}
				waitFor(t, "the stack answering on the socket a crash left", func() error {
					_, err := get(c, "http://app/ping")
					return err
				})
			}
			stopGracefully(t, app, sc.stop)
			if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("socket %s left behind by a graceful stop after a start over a stale one: %v", socket, err)
			}
		})
	}
}

// killGroup SIGKILLs a stack started in a process group of its own (startAs):
// its master and every worker.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// stopGracefully sends a stack its stop signal and wants it to exit 0 within 20 s.
func stopGracefully(t *testing.T, app *exec.Cmd, sig os.Signal) {
	t.Helper()
	if err := app.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after %v: %v, want exit 0", sig, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("still running 20 s after %v", sig)
	}
}

// A stop with requests in flight answers them (stacks/README.md's
// "Stopping"): a /sleep on each listener, sent before the stack's stop
// signal and still waiting when it comes, gets its 200 and its body; the
// stack exits 0 and removes its socket. HTTP stacks (a FastCGI one's drain is
// make contract's, in e2e).
func TestStacksAnswerInFlightAtStop(t *testing.T) {
	for _, sc := range stackCases(t) {
		if sc.variant != "" || sc.stack.Protocol != "http" {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			u := newAppUser(t, lab.ShortTempDir(t))
			socket := filepath.Join(u.sockDir, "app.sock")
			port := lab.FreePort(t)
			env := append(append(os.Environ(), sc.env...), fmt.Sprintf("APP_TCP_ADDR=127.0.0.1:%d", port),
				"APP_UNIX_SOCKET="+socket)
			app := startAs(t, sc.name, env, u.cred, sc.argv...)
			// A connection per request: what a stack does with a connection
			// kept idle after the drain is another matter (Debian's Node 18
			// holds it until its keep-alive timeout, past the stop's 15 s).
			clients := map[string]*http.Client{
				"tcp": {Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
				"unix": {Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
					DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
						return (&net.Dialer{}).DialContext(ctx, "unix", socket)
					}}},
			}
			base := map[string]string{"tcp": fmt.Sprintf("http://127.0.0.1:%d", port), "unix": "http://app"}
			for l, c := range clients {
				waitFor(t, sc.name+" answering on "+l, func() error { _, err := get(c, base[l]+"/ping"); return err })
			}
			const ms = 1500
			type answer struct {
				listener string
				body     []byte
				err      error
			}
			answers := make(chan answer, len(clients))
			for l, c := range clients {
				go func() {
					body, err := get(c, fmt.Sprintf("%s/sleep/%d", base[l], ms))
					answers <- answer{l, body, err}
				}()
			}
			time.Sleep(ms / 3 * time.Millisecond) // both requests sent, both waiting
			sent := time.Now()
			if err := app.Process.Signal(sc.stop); err != nil {
				t.Fatal(err)
			}
			for range clients {
				a := <-answers
				if want := fmt.Sprintf(`{"slept_ms":%d}`, ms); a.err != nil || strings.TrimSpace(string(a.body)) != want {
					t.Errorf("/sleep/%d on %s, in flight at %v: %q, %v; want %s", ms, a.listener, sc.stop, a.body, a.err, want)
				}
			}
			t.Logf("both answered %v after %v", time.Since(sent).Round(time.Millisecond), sc.stop)
			done := make(chan error, 1)
			go func() { done <- app.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("after %v with requests in flight: %v, want exit 0", sc.stop, err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("still running 20 s after %v", sc.stop)
			}
			if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("socket %s left behind after a stop with requests in flight: %v", socket, err)
			}
		})
	}
}
