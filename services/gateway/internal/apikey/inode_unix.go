//go:build unix

package apikey

import (
	"os"
	"syscall"
)

// inode tells a renamed-over file from the old one even when both were
// written within the file system's timestamp granularity.
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
