package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
)

// writeDownloadFile (re)creates the file served by /download/*, filled with
// the deterministic non-zero pattern. It writes a temp file and renames it so
// a concurrent reader never sees a half-written file.
func writeDownloadFile(path string, size int64) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".download-*")
	if err != nil {
		return fmt.Errorf("APP_DOWNLOAD_FILE %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
			err = fmt.Errorf("APP_DOWNLOAD_FILE %s: %w", path, err)
		}
	}()

	w := bufio.NewWriterSize(tmp, 64<<10)
	chunk := make([]byte, 64<<10)
	for off := int64(0); off < size; {
		n := min(int64(len(chunk)), size-off)
		fillPattern(chunk[:n], off)
		if _, err := w.Write(chunk[:n]); err != nil {
			return err
		}
		off += n
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
