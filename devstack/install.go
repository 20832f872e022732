package devstack

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// Installer installs PostgreSQL's server where make run finds none.
type Installer interface {
	// Possible reports whether it can install here.
	Possible() bool
	// Install installs it, its output to log.
	Install(ctx context.Context, log io.Writer) error
}

// AptInstaller installs Debian's postgresql with apt-get, as .ci/run does:
// possible as root on Debian or Ubuntu (or a derivative) with apt-get.
type AptInstaller struct {
	// OSRelease is the os-release file read; empty: /etc/os-release.
	OSRelease string
}

// Possible reports whether this is root on a Debian-like system with
// apt-get.
func (a AptInstaller) Possible() bool {
	if os.Geteuid() != 0 {
		return false
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return false
	}
	return debianLike(a.OSRelease)
}

// debianLike reports whether the os-release file at path (empty:
// /etc/os-release) names Debian or Ubuntu, as ID or in ID_LIKE.
func debianLike(path string) bool {
	if path == "" {
		path = "/etc/os-release"
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok || (k != "ID" && k != "ID_LIKE") {
			continue
		}
		for _, id := range strings.Fields(strings.Trim(v, `"'`)) {
			if id == "debian" || id == "ubuntu" {
				return true
			}
		}
	}
	return false
}

// policy is the policy-rc.d that keeps the package's scripts from starting
// a cluster of their own (make run runs its own under .local/pg).
const policy = "/usr/sbin/policy-rc.d"

// Install runs apt-get update and apt-get install postgresql.
func (AptInstaller) Install(ctx context.Context, log io.Writer) error {
	if _, err := os.Stat(policy); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(policy, []byte("#!/bin/sh\nexit 101\n"), 0o755); err == nil {
			defer os.Remove(policy)
		}
	}
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "--no-install-recommends", "postgresql"}} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get %s: %w", args[0], err)
		}
	}
	return nil
}
