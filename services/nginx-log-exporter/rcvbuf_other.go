//go:build !linux

package main

import (
	"errors"
	"syscall"
)

func socketReadBuffer(syscall.Conn) (int, error) {
	return 0, errors.New("not supported on this platform")
}

func growPipe(syscall.Conn, int) (int, error) {
	return 0, errors.New("not supported on this platform")
}
