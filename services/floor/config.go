package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
)

// ServeConfig: where the echo server listens.
type ServeConfig struct {
	TCPAddr    string      // FLOOR_TCP_ADDR, default ":9100"
	UnixSocket string      // FLOOR_UNIX_SOCKET, empty: none (the far server has none)
	SocketMode os.FileMode // FLOOR_SOCKET_MODE, default 0660
}

// BenchConfig: the plan to run; floor.json goes beside it.
type BenchConfig struct {
	Plan string // FLOOR_PLAN
}

func serveConfig(getenv func(string) string) (ServeConfig, error) {
	cfg := ServeConfig{TCPAddr: ":9100", UnixSocket: getenv("FLOOR_UNIX_SOCKET"), SocketMode: 0o660}
	if v := getenv("FLOOR_TCP_ADDR"); v != "" {
		cfg.TCPAddr = v
	}
	if _, port, err := net.SplitHostPort(cfg.TCPAddr); err != nil || port == "" {
		return cfg, fmt.Errorf("FLOOR_TCP_ADDR=%q: want host:port or :port", cfg.TCPAddr)
	}
	if v := getenv("FLOOR_SOCKET_MODE"); v != "" {
		m, err := strconv.ParseUint(v, 8, 32)
		if err != nil || m > 0o777 {
			return cfg, fmt.Errorf("FLOOR_SOCKET_MODE=%q: want an octal mode such as 0660", v)
		}
		cfg.SocketMode = os.FileMode(m)
	}
	return cfg, nil
}

func benchConfig(getenv func(string) string) (BenchConfig, error) {
	cfg := BenchConfig{Plan: getenv("FLOOR_PLAN")}
	if cfg.Plan == "" {
		return cfg, fmt.Errorf("FLOOR_PLAN: the plan.json to run (make floor writes it with loadgen/plan.py)")
	}
	return cfg, nil
}
