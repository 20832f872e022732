// Command loadtest measures the gateway against two reference proxies in
// front of the same real payout service: a bare pooled
// httputil.ReverseProxy (this binary's "proxy" subcommand) and Caddy's
// reverse_proxy. Each round runs wrk against every target in turn (the order
// rotates, so no target always goes first), for the quote POST and the
// list GET, at each concurrency; the table is the median over rounds of
// each target's requests per second, p50 and p99 latency, the CPU each
// process spent per request (the proxy, the payout service, redis-server),
// the proxy's read and write system calls and context switches per request
// (counts, which a noisy machine hardly moves, unlike CPU time) and its
// resident memory.
//
//	make loadtest                                  # builds, then runs this
//	go run ./devstack/cmd/loadtest -rounds 7 -duration 5s -conns 32,256
//
// The stack runs as a deployment runs it: each binary's logs go to a pipe
// this program drains (never kept), sandbox environment, no trace exporter.
// It needs wrk (Debian's package) and redis-server; Caddy is installed with
// go install when it is not on the PATH. It is not part of make test.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/devstack"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/pkg/upstream"
	"github.com/partnerpay/api/testkit/freeport"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "proxy" {
		bareProxy(os.Args[2:])
		return
	}
	rounds := flag.Int("rounds", 5, "interleaved rounds; the table shows medians")
	duration := flag.Duration("duration", 5*time.Second, "each wrk run")
	conns := flag.String("conns", "32,256", "wrk connection counts")
	threads := flag.Int("threads", 2, "wrk threads")
	bin := flag.String("bin", "bin", "where make build put the binaries")
	only := flag.String("targets", "direct,bare,caddy,gateway", "targets to measure")
	profile := flag.String("profile", "", "write a CPU profile of the gateway (its admin /debug/pprof) during its last run of -profile-endpoint to this file")
	profileEndpoint := flag.String("profile-endpoint", "quote", "the endpoint whose last run -profile covers: quote, list or status")
	flag.Parse()
	log.SetFlags(0)

	for _, tool := range []string{"wrk", "redis-server"} {
		if _, err := exec.LookPath(tool); err != nil {
			log.Fatalf("loadtest needs %s on the PATH (apt-get install %s)", tool, map[string]string{"wrk": "wrk", "redis-server": "redis-server"}[tool])
		}
	}
	caddy, err := findCaddy()
	if err != nil {
		log.Fatal(err)
	}
	absBin, err := filepath.Abs(*bin)
	if err != nil {
		log.Fatal(err)
	}
	h, err := start(absBin, caddy)
	if err != nil {
		log.Fatal(err)
	}
	defer h.stop()
	fmt.Fprintf(os.Stderr, "gateway %s (admin %s), payout %s (admin %s)\n", h.stack.GatewayURL, h.stack.Services["gateway"].AdminAddr,
		h.stack.Services["payout"].Addr, h.stack.Services["payout"].AdminAddr)

	var targets []*target
	for _, name := range strings.Split(*only, ",") {
		t := h.targets[name]
		if t == nil {
			log.Fatalf("no target %q (direct, bare, caddy, gateway)", name)
		}
		targets = append(targets, t)
	}
	var cs []int
	for _, c := range strings.Split(*conns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			log.Fatalf("bad -conns %q", *conns)
		}
		cs = append(cs, n)
	}

	results := map[string][]sample{} // key: target|endpoint|conns
	fmt.Fprintf(os.Stderr, "warming up\n")
	for _, t := range targets {
		for _, e := range endpoints {
			if _, err := h.run(t, e, cs[0], *threads, time.Second); err != nil {
				log.Fatal(err)
			}
		}
	}
	for r := range *rounds {
		for _, c := range cs {
			for _, e := range endpoints {
				for i := range targets {
					t := targets[(i+r)%len(targets)] // rotate who goes first
					var prof chan error
					if *profile != "" && t.name == "gateway" && e.name == *profileEndpoint && r == *rounds-1 && c == cs[0] {
						prof = h.profile(*profile, *duration-time.Second)
					}
					s, err := h.run(t, e, c, *threads, *duration)
					if prof != nil {
						if err := <-prof; err != nil {
							log.Printf("profile: %v", err)
						}
					}
					if err != nil {
						log.Fatal(err)
					}
					k := t.name + "|" + e.name + "|" + strconv.Itoa(c)
					results[k] = append(results[k], s)
					fmt.Fprintf(os.Stderr, "round %d/%d  %-8s %-6s c=%-4d %8.0f rps  p50 %6.2fms  p99 %6.2fms  cpu %5.1f µs/req\n",
						r+1, *rounds, t.name, e.name, c, s.rps, s.p50, s.p99, s.proxyCPU)
				}
			}
		}
	}
	report(os.Stdout, targets, cs, results, *rounds, *duration)
}

// endpoint is one request the load generator repeats.
type endpoint struct {
	name, method, path, body string
	refused                  bool // answered 4xx by design
}

var endpoints = []endpoint{
	{"quote", "POST", "/v1/bank/payout/quote", `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"100"}`, false},
	// A proxied GET (the reference reads are the gateway's own, DESIGN §1):
	// the key's newest payout, from PostgreSQL.
	{"list", "GET", "/v1/bank/payouts?limit=1", "", false},
	// A call whose service does next to nothing: a malformed payout id's
	// status is 404 payout_not_found before any lookup. What is left is
	// the proxy's own cost.
	{"status", "POST", "/v1/bank/payout/status", `{"payoutId":"bpo_0"}`, true},
}

// target is one way to reach the payout service.
type target struct {
	name, label string
	base        string
	headers     map[string]string
	pid         int // the proxy's process, 0 for direct
}

type harness struct {
	stack    *devstack.Stack
	redis    *redis.Client
	targets  map[string]*target
	children []*exec.Cmd
	dir      string
}

const keyID = "load"

func start(bin, caddy string) (*harness, error) {
	dir, err := os.MkdirTemp("", "loadtest-")
	if err != nil {
		return nil, err
	}
	h := &harness{dir: dir, targets: map[string]*target{}}
	keys := filepath.Join(dir, "keys.json")
	// A key whose rate is never reached: the limiter decides every request
	// (and is measured) but never refuses one. At this rate it leases its
	// tokens from Redis (1000 at a time; see the ratelimit package).
	key, err := output(filepath.Join(bin, "gateway"), "keys", "issue", "--file", keys, "--id", keyID,
		"--products", "bank", "--source-chains", "84532", "--rate", "100000", "--max-execution-usd", "25000")
	if err != nil {
		return nil, err
	}
	ports := map[string]string{}
	addrs, err := freeport.Addrs(12) // five services and their admin ports, the bare proxy, Caddy
	if err != nil {
		return nil, err
	}
	for i, svc := range []string{"gateway", "payout", "fiat", "consent", "sandboxbank"} {
		ports[svc], ports[svc+"_admin"] = addrs[2*i], addrs[2*i+1]
	}
	s, err := devstack.Start(context.Background(), devstack.Options{
		BinDir: bin, StateDir: dir, KeysFile: keys, Ports: ports,
		Env:  map[string]string{"SHUTDOWN_DRAIN": "0s"},
		Logs: io.Discard, Out: io.Discard,
	})
	if err != nil {
		return nil, err
	}
	h.stack = s
	ropts, err := redis.ParseURL(s.RedisURL)
	if err != nil {
		return nil, err
	}
	h.redis = redis.NewClient(ropts)
	payout := "http://" + s.Services["payout"].Addr

	grants, _ := json.Marshal(partner.Grants{Products: []string{"bank"}, Chains: partner.Chains{Source: []int64{84532}}, MaxExecutionUSD: "25000"})
	// What the gateway adds on the way in, sent by the load generator itself
	// to the targets that are not the gateway, so the payout service does
	// the same work for all of them.
	internal := map[string]string{
		partner.HeaderInternalToken: s.InternalToken,
		partner.HeaderKeyID:         keyID,
		partner.HeaderGrants:        string(grants),
	}
	h.targets["direct"] = &target{name: "direct", label: "payout direct", base: payout, headers: internal}
	h.targets["gateway"] = &target{name: "gateway", label: "**our gateway**", base: s.GatewayURL,
		headers: map[string]string{"Authorization": "Bearer " + key}, pid: s.Services["gateway"].Pid()}

	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// Every Go process is tuned as the stack's are (devstack sets GOGC=400,
	// as compose and the chart do): the proxies compare, not their
	// collectors' settings.
	bare := exec.Command(self, "proxy", addrs[10], payout)
	bare.Env = append(os.Environ(), "GOGC=400")
	if err := h.startChild(bare, addrs[10]); err != nil {
		return nil, err
	}
	h.targets["bare"] = &target{name: "bare", label: "bare tuned `httputil.ReverseProxy`", base: "http://" + addrs[10], headers: internal, pid: bare.Process.Pid}

	caddyfile := filepath.Join(dir, "Caddyfile")
	conf := fmt.Sprintf("{\n\tadmin off\n\tauto_https off\n\tpersist_config off\n}\nhttp://%s {\n\treverse_proxy %s\n}\n", addrs[11], s.Services["payout"].Addr)
	if err := os.WriteFile(caddyfile, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	c := exec.Command(caddy, "run", "--config", caddyfile, "--adapter", "caddyfile")
	c.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir, "GOGC=400")
	if err := h.startChild(c, addrs[11]); err != nil {
		return nil, err
	}
	h.targets["caddy"] = &target{name: "caddy", label: "Caddy " + caddyVersion(caddy) + " `reverse_proxy`", base: "http://" + addrs[11], headers: internal, pid: c.Process.Pid}
	return h, nil
}

// profile fetches a CPU profile of the gateway over d into path.
func (h *harness) profile(path string, d time.Duration) chan error {
	done := make(chan error, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", h.stack.Services["gateway"].AdminAddr, int(d.Seconds())))
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err != nil {
			done <- err
			return
		}
		defer f.Close()
		_, err = io.Copy(f, resp.Body)
		done <- err
	}()
	return done
}

// startChild starts a reference proxy and waits until it listens on addr.
// It gets SIGTERM when this program ends however it ends (Ctrl-C, a
// failed run's log.Fatal, a timeout's kill), as the stack's processes do:
// a proxy left running would load the machine the next run measures.
func (h *harness) startChild(cmd *exec.Cmd, addr string) error {
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return err
	}
	h.children = append(h.children, cmd)
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not listen on %s", cmd.Path, addr)
}

func (h *harness) stop() {
	for _, c := range h.children {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	if h.redis != nil {
		h.redis.Close()
	}
	if h.stack != nil {
		h.stack.Stop()
	}
	os.RemoveAll(h.dir)
}

// sample is one wrk run against one target.
type sample struct {
	rps, p50, p99 float64 // requests/s; latencies in ms
	proxyCPU      float64 // µs of CPU per request in the proxy process
	upstreamCPU   float64 // … in the payout service
	redisCPU      float64 // … in redis-server
	redisCalls    float64 // commands redis-server processed per request
	rssMiB        float64 // the proxy's resident memory after the run
	reads, writes float64 // the proxy's read and write system calls per request
	switches      float64 // … and its threads' context switches per request
	non2xx        int
}

func (h *harness) run(t *target, e endpoint, conns, threads int, d time.Duration) (sample, error) {
	script := filepath.Join(h.dir, t.name+"-"+e.name+".lua")
	var b strings.Builder
	fmt.Fprintf(&b, "wrk.method = %q\n", e.method)
	if e.body != "" {
		fmt.Fprintf(&b, "wrk.body = %q\nwrk.headers[\"Content-Type\"] = \"application/json\"\n", e.body)
	}
	for k, v := range t.headers {
		fmt.Fprintf(&b, "wrk.headers[%q] = %q\n", k, v)
	}
	if err := os.WriteFile(script, []byte(b.String()), 0o600); err != nil {
		return sample{}, err
	}
	pids := []int{t.pid, h.stack.Services["payout"].Pid(), h.stack.RedisPid()}
	before, commandsBefore, workBefore := cpuTicks(pids), h.redisCommands(), kernelWork(t.pid)
	out, err := exec.Command("wrk", "--latency", "-t", strconv.Itoa(threads), "-c", strconv.Itoa(conns),
		"-d", d.String(), "-s", script, t.base+e.path).CombinedOutput()
	if err != nil {
		return sample{}, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	after, commandsAfter, workAfter := cpuTicks(pids), h.redisCommands(), kernelWork(t.pid)
	s, total, err := parseWrk(string(out))
	if err != nil {
		return sample{}, err
	}
	perReq := func(i int) float64 {
		if pids[i] == 0 || total == 0 {
			return 0
		}
		return float64(after[i]-before[i]) * (1e6 / ticksPerSecond) / float64(total)
	}
	s.proxyCPU, s.upstreamCPU, s.redisCPU = perReq(0), perReq(1), perReq(2)
	s.redisCalls = float64(commandsAfter-commandsBefore-1) / float64(total) // less our own INFO
	if t.pid != 0 {
		s.rssMiB = rssMiB(t.pid)
		n := float64(total)
		s.reads, s.writes = float64(workAfter.reads-workBefore.reads)/n, float64(workAfter.writes-workBefore.writes)/n
		s.switches = float64(workAfter.switches-workBefore.switches) / n
	}
	if s.non2xx > 0 && !e.refused {
		fmt.Fprintf(os.Stderr, "warning: %s %s: %d answers were not 2xx\n", t.name, e.name, s.non2xx)
	}
	return s, nil
}

// redisCommands is how many commands redis-server has processed.
func (h *harness) redisCommands() int64 {
	info, err := h.redis.Info(context.Background(), "stats").Result()
	if err != nil {
		log.Fatalf("redis INFO: %v", err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	log.Fatal("redis INFO stats has no total_commands_processed")
	return 0
}

// parseWrk reads wrk --latency's report: requests/s, the 50% and 99%
// latencies, how many requests, and how many were not 2xx or 3xx.
func parseWrk(out string) (sample, int, error) {
	var s sample
	total := 0
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 2 && f[0] == "Requests/sec:":
			s.rps, _ = strconv.ParseFloat(f[1], 64)
		case len(f) == 2 && f[0] == "50%":
			s.p50 = ms(f[1])
		case len(f) == 2 && f[0] == "99%":
			s.p99 = ms(f[1])
		case len(f) >= 3 && f[1] == "requests" && f[2] == "in":
			total, _ = strconv.Atoi(f[0])
		case len(f) == 5 && f[0] == "Non-2xx":
			s.non2xx, _ = strconv.Atoi(f[4])
		}
	}
	if s.rps == 0 || total == 0 {
		return s, 0, fmt.Errorf("could not read wrk's report:\n%s", out)
	}
	return s, total, nil
}

// ms converts a wrk duration (850.00us, 1.20ms, 1.02s) to milliseconds.
func ms(v string) float64 {
	for _, u := range []struct {
		suffix string
		scale  float64
	}{{"us", 1e-3}, {"ms", 1}, {"s", 1e3}} {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			f, _ := strconv.ParseFloat(n, 64)
			return f * u.scale
		}
	}
	return 0
}

// ticksPerSecond is USER_HZ, 100 on Linux.
const ticksPerSecond = 100

// cpuTicks reads each process's user+system CPU time, in clock ticks.
func cpuTicks(pids []int) []int64 {
	out := make([]int64, len(pids))
	for i, pid := range pids {
		if pid == 0 {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The command name may hold spaces; fields count from after ")".
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		out[i] = utime + stime
	}
	return out
}

// work is what the kernel did for a process: its read and write system
// calls (any file or socket; a read that found nothing counts) and its
// threads' context switches. Unlike CPU time, these counts hardly move
// with a noisy machine.
type work struct{ reads, writes, switches int64 }

// kernelWork reads /proc/<pid>/io (the whole process) and each thread's
// context switches; zero for pid 0.
func kernelWork(pid int) work {
	var w work
	if pid == 0 {
		return w
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid)); err == nil {
		w.reads, w.writes = procField(string(b), "syscr:"), procField(string(b), "syscw:")
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	for _, t := range tasks {
		if b, err := os.ReadFile(t); err == nil {
			w.switches += procField(string(b), "voluntary_ctxt_switches:") + procField(string(b), "nonvoluntary_ctxt_switches:")
		}
	}
	return w
}

// procField is the number after name at the start of a line of a /proc
// file, or 0.
func procField(text, name string) int64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

func rssMiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func med(ss []sample, f func(sample) float64) float64 {
	xs := make([]float64, len(ss))
	for i, s := range ss {
		xs[i] = f(s)
	}
	return median(xs)
}

// report prints the table (Markdown) and the gateway's ratios.
func report(w io.Writer, targets []*target, conns []int, results map[string][]sample, rounds int, d time.Duration) {
	fmt.Fprintf(w, "\nMedians of %d interleaved rounds of %s each, wrk on this machine (%d CPUs), same payout service and Redis behind every target.\n",
		rounds, d, numCPU())
	for _, c := range conns {
		fmt.Fprintf(w, "\n### -c%d\n\n", c)
		fmt.Fprintln(w, "| target | quote POST rps | quote p50 / p99 ms | list GET rps | list p50 / p99 ms | proxy CPU µs/req (quote / list) | proxy reads + writes /req (quote / list) | proxy switches /req (quote / list) | payout CPU µs/req | redis CPU µs/req (quote / list) | redis calls/req (quote / list) | proxy RSS MiB |")
		fmt.Fprintln(w, "| - | - | - | - | - | - | - | - | - | - | - | - |")
		for _, t := range targets {
			q, g := results[t.name+"|quote|"+strconv.Itoa(c)], results[t.name+"|list|"+strconv.Itoa(c)]
			cpu := "—"
			if t.pid != 0 {
				cpu = fmt.Sprintf("%.0f / %.0f", med(q, func(s sample) float64 { return s.proxyCPU }), med(g, func(s sample) float64 { return s.proxyCPU }))
			}
			rss, calls, switches := "—", "—", "—"
			if t.pid != 0 {
				rss = fmt.Sprintf("%.1f", max(med(q, func(s sample) float64 { return s.rssMiB }), med(g, func(s sample) float64 { return s.rssMiB })))
				calls = fmt.Sprintf("%.1f + %.1f / %.1f + %.1f", med(q, func(s sample) float64 { return s.reads }), med(q, func(s sample) float64 { return s.writes }),
					med(g, func(s sample) float64 { return s.reads }), med(g, func(s sample) float64 { return s.writes }))
				switches = fmt.Sprintf("%.1f / %.1f", med(q, func(s sample) float64 { return s.switches }), med(g, func(s sample) float64 { return s.switches }))
			}
			fmt.Fprintf(w, "| %s | %.0f | %.2f / %.2f | %.0f | %.2f / %.2f | %s | %s | %s | %.0f | %.1f / %.1f | %.2f / %.2f | %s |\n", t.label,
				med(q, func(s sample) float64 { return s.rps }), med(q, func(s sample) float64 { return s.p50 }), med(q, func(s sample) float64 { return s.p99 }),
				med(g, func(s sample) float64 { return s.rps }), med(g, func(s sample) float64 { return s.p50 }), med(g, func(s sample) float64 { return s.p99 }),
				cpu, calls, switches, med(q, func(s sample) float64 { return s.upstreamCPU }),
				med(q, func(s sample) float64 { return s.redisCPU }), med(g, func(s sample) float64 { return s.redisCPU }),
				med(q, func(s sample) float64 { return s.redisCalls }), med(g, func(s sample) float64 { return s.redisCalls }), rss)
		}
		gw := func(e string) []sample { return results["gateway|"+e+"|"+strconv.Itoa(c)] }
		for _, ref := range []string{"bare", "caddy"} {
			if results[ref+"|quote|"+strconv.Itoa(c)] == nil || gw("quote") == nil {
				continue
			}
			ratio := func(e string, v func(sample) float64) float64 {
				return med(gw(e), v) / med(results[ref+"|"+e+"|"+strconv.Itoa(c)], v)
			}
			rps := func(s sample) float64 { return s.rps }
			cpu := func(s sample) float64 { return s.proxyCPU }
			// CPU per request is also given against the other proxy's in
			// the same run: µs on their own cannot be compared across runs
			// on a shared machine (the bare proxy has measured 53–68 and
			// 140–220 µs a request on the same kind of 2-core VM).
			fmt.Fprintf(w, "\ngateway / %s: quote %.2f×, list %.2f×; CPU per request quote %.2f×, list %.2f×",
				ref, ratio("quote", rps), ratio("list", rps), ratio("quote", cpu), ratio("list", cpu))
		}
		for _, ref := range []string{"bare", "caddy"} {
			theirs := results[ref+"|status|"+strconv.Itoa(c)]
			if theirs == nil || gw("status") == nil {
				continue
			}
			rps := func(s sample) float64 { return s.rps }
			cpu := func(s sample) float64 { return s.proxyCPU }
			fmt.Fprintf(w, "\ngateway / %s, a malformed id's status (the service answers 404 at once): %.2f× (%.0f against %.0f rps); CPU per request %.2f× (%.0f against %.0f µs)",
				ref, med(gw("status"), rps)/med(theirs, rps), med(gw("status"), rps), med(theirs, rps),
				med(gw("status"), cpu)/med(theirs, cpu), med(gw("status"), cpu), med(theirs, cpu))
		}
		if bare := results["bare|list|"+strconv.Itoa(c)]; bare != nil && gw("list") != nil {
			// The list GET touches Redis only to limit: what the gateway
			// adds there over the bare proxy is the limiter's cost.
			cpu := func(s sample) float64 { return s.redisCPU }
			calls := func(s sample) float64 { return s.redisCalls }
			fmt.Fprintf(w, "\nlimiting in Redis (gateway − bare, list GET): %.1f µs CPU and %.3f commands per request",
				med(gw("list"), cpu)-med(bare, cpu), med(gw("list"), calls)-med(bare, calls))
		}
		fmt.Fprintln(w)
	}
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "processor\t:")
}

// bareProxy is the reference: the standard library's reverse proxy tuned
// as the gateway's is (Rewrite, the gateway's transport settings from
// upstream.Transport, a BufferPool of the same size), served by the
// http.Server every binary of ours runs (serve.NewServer: its header,
// read, write and idle timeouts, which any proxy facing the internet
// needs, and which cost net/http three deadline updates a request), and
// nothing else: no keys, no limiter, no logs, no metrics.
func bareProxy(args []string) {
	if len(args) != 2 {
		log.Fatal("usage: loadtest proxy LISTEN UPSTREAM")
	}
	u, err := url.Parse(args[1])
	if err != nil {
		log.Fatal(err)
	}
	tr, err := upstream.Transport(upstream.Options{})
	if err != nil {
		log.Fatal(err)
	}
	p := &httputil.ReverseProxy{
		Rewrite:    func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		Transport:  tr,
		BufferPool: upstream.NewBufferPool(16 << 10),
	}
	log.Fatal(serve.NewServer(args[0], p, slog.New(slog.DiscardHandler)).ListenAndServe())
}

// findCaddy is caddy on the PATH or in GOPATH/bin, installed there when
// missing.
func findCaddy() (string, error) {
	if p, err := exec.LookPath("caddy"); err == nil {
		return p, nil
	}
	gopath, err := output("go", "env", "GOPATH")
	if err != nil {
		return "", err
	}
	p := filepath.Join(gopath, "bin", "caddy")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	fmt.Fprintln(os.Stderr, "installing caddy v2.11.9 (go install; a few minutes, once)")
	cmd := exec.Command("go", "install", "github.com/caddyserver/caddy/v2/cmd/caddy@v2.11.9")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("install caddy: %w", err)
	}
	return p, nil
}

func caddyVersion(caddy string) string {
	// go install builds say "unknown"; the version is then the module's.
	if v, err := output("go", "version", "-m", caddy); err == nil {
		for _, line := range strings.Split(v, "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "mod" && f[1] == "github.com/caddyserver/caddy/v2" {
				return f[2]
			}
		}
	}
	return "v2"
}

func output(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}
