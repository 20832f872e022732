package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// shellBlock is one ```sh block of a document, with the line it starts on.
type shellBlock struct {
	line int
	code string
}

// shellBlocks are the ```sh blocks of the Markdown file at path that a
// reader pastes, in order: every one but those the line before marks
// `<!-- not run by the guide test: why -->` (an operator's command, a loop
// that follows a feed forever, the key make run printed).
func shellBlocks(t *testing.T, path string) []shellBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []shellBlock
	var cur *shellBlock
	skip := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur != nil && line == "```":
			if !skip {
				blocks = append(blocks, *cur)
			}
			cur, skip = nil, false
		case cur != nil:
			cur.code += line + "\n"
		case line == "```sh":
			cur = &shellBlock{line: n + 1}
		case strings.HasPrefix(line, "<!-- not run by the guide test:"):
			skip = true
		case strings.TrimSpace(line) != "":
			skip = false
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s: a ```sh block from line %d is never closed", path, cur.line)
	}
	return blocks
}

// runGuide runs a document's blocks, as written and in order, in one bash
// (set -euo pipefail: a command that fails, a jq that finds no JSON, stops
// it), with API and KEY as make run's line sets them. It returns what the
// blocks printed.
func runGuide(t *testing.T, path, api, key string) string {
	t.Helper()
	blocks := shellBlocks(t, path)
	if len(blocks) == 0 {
		t.Fatalf("%s has no block to run", path)
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	for _, b := range blocks {
		fmt.Fprintf(&script, "echo '== %s:%d' >&2\n%s", path, b.line, b.code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Env = append(os.Environ(), "API="+api, "KEY="+key)
	cmd.Dir = t.TempDir() // what a block saves (openapi.yaml) lands here
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		// stderr's last "== file:line" names the block that failed.
		t.Fatalf("%s: %v\nstderr:\n%s\nstdout:\n%s", path, err, tail(stderr.String(), 40), tail(stdout.String(), 40))
	}
	return stdout.String()
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestTheDocsPasteEndToEnd: the README's first payout and every walkthrough
// of the partner guide, pasted as written against the stack make run
// starts, end where the documents say they end: each payout, refund,
// consent, funding and card order reaches the state the guide prints. The
// key has make run's grants at a higher rate: a script pastes faster than a
// person does.
func TestTheDocsPasteEndToEnd(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	if onCluster() {
		t.Skip("the walkthroughs do not depend on the Redis store; the single-node run covers them")
	}
	if _, err := exec.LookPath("jq"); err != nil {
		t.Fatal("jq is not installed (Debian's jq package; .ci/run installs it): the documents use it")
	}
	s := startStack(t)
	key := s.issue("sandbox", "--products", "bank,fiat,deposit,card", "--source-chains", "84532,11155111",
		"--destination-chains", "84532,11155111", "--rate", "100", "--max-execution-usd", "25000")

	for _, doc := range []struct {
		path string
		want []string // regular expressions, each a line the walkthroughs print
	}{
		{"../../README.md", []string{`^payout bpo_\w+: completed$`}},
		{"../../docs/partner-guide.md", []string{
			`^payout bpo_\w+: completed$`,
			`^payout bpo_\w+: failed$`,
			`^refund of bpo_\w+: confirmed$`,
			// The failed payout's events, as the feed section prints them.
			`^\{"type":"payout.awaiting_deposit","previous":null\}$`,
			`^\{"type":"payout.processing","previous":"awaiting_deposit"\}$`,
			`^\{"type":"payout.failed","previous":"processing"\}$`,
			`^\{"type":"payout.refund.awaiting_address","previous":null\}$`,
			`^\{"type":"payout.refund.pending","previous":"awaiting_address"\}$`,
			`^consent cs_\w+: returned$`,
			`^\{"status":"funded","deliveredAmount":"100.50","depositedAmount":"100.50","txHash":"0x[0-9a-f]{64}"\}$`,
			`^\{"depositId":"dep_\w+","status":"funded","deliveredAmount":"250.00"\}$`,
			`^order ord_\w+: completed$`,
		}},
	} {
		out := runGuide(t, doc.path, s.GatewayURL, key)
		for _, w := range doc.want {
			if !regexp.MustCompile(`(?m)` + w).MatchString(out) {
				t.Errorf("%s: no line matches %s; it printed:\n%s", doc.path, w, tail(out, 60))
			}
		}
	}
}
