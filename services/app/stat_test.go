package main

import (
	"os"
	"syscall"
)

func fileGID(st os.FileInfo) int {
	return int(st.Sys().(*syscall.Stat_t).Gid)
}
