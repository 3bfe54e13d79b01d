//go:build !linux

package main

import (
	"errors"
	"net"
)

func socketReadBuffer(*net.UDPConn) (int, error) {
	return 0, errors.New("not supported on this platform")
}
