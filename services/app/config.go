package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Limits enforced on the configuration and on request parameters.
const (
	maxDownloadSize = 1 << 30  // APP_DOWNLOAD_SIZE cap: 1 GiB.
	maxBytes        = 16 << 20 // /bytes/:n cap: 16 MiB, also the size of the shared payload buffer.
	maxSleepMS      = 10000    // /sleep/:ms cap: 10 s, the longest request the app serves.
	maxUnixPathLen  = 107      // sun_path is 108 bytes including the trailing NUL.
)

// longestRequest is how long a request may take, by design: /sleep's cap
// (a /cpu request waits APP_CPU_QUEUE_TIMEOUT, 5 s by default, plus its own
// run). The drain budget must outlast it: APP_SHUTDOWN_TIMEOUT defaults to it
// plus 5 s, because net/http's Shutdown looks for idle connections only every
// 500 ms, and compose's stop_grace_period (20 s) outlasts that.
const longestRequest = maxSleepMS * time.Millisecond

// Config is the validated runtime configuration, read once at start.
type Config struct {
	TCPAddr          string
	UnixSocket       string
	SocketMode       os.FileMode
	SocketGID        int // -1: leave the group the socket was created with.
	ShutdownTimeout  time.Duration
	DownloadFile     string
	DownloadSize     int64
	CPUMaxIterations int64
	CPU              CPULimits
}

// loadConfig reads every APP_* setting through getenv (so tests need no real
// environment), applies defaults and validates. Errors name the setting and
// the offending value so a bad deployment fails at start, not on first use.
func loadConfig(getenv func(string) string) (Config, error) {
	get := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	var cfg Config
	if err := loadListeners(&cfg, get); err != nil {
		return cfg, err
	}
	if err := loadLimits(&cfg, get); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// loadListeners reads where and how the app listens: its TCP address, its
// socket's path, mode and group.
func loadListeners(cfg *Config, get func(string, string) string) error {
	var err error
	cfg.TCPAddr = get("APP_TCP_ADDR", ":8080")
	if err := validateTCPAddr(cfg.TCPAddr); err != nil {
		return fmt.Errorf("APP_TCP_ADDR=%q: %w", cfg.TCPAddr, err)
	}

	cfg.UnixSocket = get("APP_UNIX_SOCKET", "/sock/app.sock")
	if len(cfg.UnixSocket) > maxUnixPathLen {
		return fmt.Errorf("APP_UNIX_SOCKET=%q: path is %d bytes, the limit for a Unix socket is %d",
			cfg.UnixSocket, len(cfg.UnixSocket), maxUnixPathLen)
	}

	modeStr := get("APP_SOCKET_MODE", "0660")
	if cfg.SocketMode, err = parseSocketMode(modeStr); err != nil {
		return fmt.Errorf("APP_SOCKET_MODE=%q: %w", modeStr, err)
	}

	cfg.SocketGID = -1
	if v := get("APP_SOCKET_GID", ""); v != "" {
		gid, err := strconv.Atoi(v)
		if err != nil || gid < 0 {
			return fmt.Errorf("APP_SOCKET_GID=%q: must be a numeric group id >= 0 (or empty to keep the process's group)", v)
		}
		cfg.SocketGID = gid
	}
	return nil
}

// loadLimits reads what bounds the app's work: its shutdown timeout, the
// download's file and size, and the CPU route's iterations, concurrency and
// queue.
func loadLimits(cfg *Config, get func(string, string) string) error {
	var err error
	toStr := get("APP_SHUTDOWN_TIMEOUT", (longestRequest + 5*time.Second).String())
	if cfg.ShutdownTimeout, err = time.ParseDuration(toStr); err != nil {
		return fmt.Errorf("APP_SHUTDOWN_TIMEOUT=%q: must be a Go duration such as 10s or 500ms", toStr)
	}
	if cfg.ShutdownTimeout <= 0 {
		return fmt.Errorf("APP_SHUTDOWN_TIMEOUT=%q: must be greater than 0", toStr)
	}

	cfg.DownloadFile = get("APP_DOWNLOAD_FILE", "/tmp/uds-lab-download.bin")

	sizeStr := get("APP_DOWNLOAD_SIZE", "1048576")
	if cfg.DownloadSize, err = strconv.ParseInt(sizeStr, 10, 64); err != nil || cfg.DownloadSize < 0 || cfg.DownloadSize > maxDownloadSize {
		return fmt.Errorf("APP_DOWNLOAD_SIZE=%q: must be an integer number of bytes between 0 and %d", sizeStr, maxDownloadSize)
	}

	cpuStr := get("APP_CPU_MAX_ITERATIONS", "1000000")
	if cfg.CPUMaxIterations, err = strconv.ParseInt(cpuStr, 10, 64); err != nil || cfg.CPUMaxIterations < 1 {
		return fmt.Errorf("APP_CPU_MAX_ITERATIONS=%q: must be an integer greater than 0", cpuStr)
	}

	def := defaultCPULimits()
	if cfg.CPU.Concurrency, err = intSetting(get, "APP_CPU_CONCURRENCY", def.Concurrency, 1, 10000); err != nil {
		return err
	}
	if cfg.CPU.Queue, err = intSetting(get, "APP_CPU_QUEUE", def.Queue, 0, 100000); err != nil {
		return err
	}
	qtStr := get("APP_CPU_QUEUE_TIMEOUT", def.QueueTimeout.String())
	if cfg.CPU.QueueTimeout, err = time.ParseDuration(qtStr); err != nil || cfg.CPU.QueueTimeout <= 0 {
		return fmt.Errorf("APP_CPU_QUEUE_TIMEOUT=%q: must be a Go duration greater than 0, such as 5s", qtStr)
	}
	return nil
}

// intSetting reads an integer setting in [lo, hi], def when unset.
func intSetting(get func(string, string) string, name string, def, lo, hi int) (int, error) {
	raw := get(name, strconv.Itoa(def))
	v, err := strconv.Atoi(raw)
	if err != nil || v < lo || v > hi {
		return 0, fmt.Errorf("%s=%q: must be an integer between %d and %d", name, raw, lo, hi)
	}
	return v, nil
}

func validateTCPAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port or :port (%v)", err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q must be a number between 0 and 65535", port)
	}
	return nil
}

// parseSocketMode accepts an octal permission string that keeps the lab's
// rule for the socket (README, "The app and its contract"; the same rule as
// contract/checker/socketmode, tested against contract/socket-modes.json):
// read and write for the owner and for nginx's group (APP_SOCKET_GID),
// nothing for others. The socket file's permissions are the access control
// for the Unix listener: connect(2) needs write permission, so the group's
// write bit lets nginx in, and any bit for others (the 0777/0666 often
// suggested online, or a readable 0664) is refused.
func parseSocketMode(s string) (os.FileMode, error) {
	m, err := strconv.ParseUint(strings.TrimPrefix(s, "0o"), 8, 32)
	switch {
	case err != nil:
		return 0, fmt.Errorf("must be an octal permission such as 0660")
	case m > 0o777:
		return 0, fmt.Errorf("must not set bits beyond 0777 (setuid/setgid/sticky are meaningless on a socket)")
	case m&0o007 != 0:
		return 0, fmt.Errorf("must give others nothing (any local user could connect); use 0660 and APP_SOCKET_GID")
	case m&0o060 != 0o060:
		return 0, fmt.Errorf("must give the group read and write (nginx's group connects through it); use 0660 and APP_SOCKET_GID")
	case m&0o600 != 0o600:
		// Without write even the app's own healthcheck (the owner) is refused.
		return 0, fmt.Errorf("must give the owner read and write (connecting needs write permission)")
	}
	return os.FileMode(m), nil
}
