// Package deploycheck holds the checks of the deployment files that need
// more than their own tools: the Helm chart rendered for both values files,
// every manifest decoded strictly into the official Kubernetes types, and
// what the objects promise (probes, disruption budgets, autoscaling,
// network policies, security contexts, secrets, grace periods).
package deploycheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/partnerpay/api/pkg/config"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cnpgv1 "github.com/cloudnative-pg/cloudnative-pg/api/v1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"

	"github.com/partnerpay/api/devstack"
)

const chart = "../../deploy/helm/partner-api"

// rendered is one release's objects, by kind and name.
type rendered struct {
	deployments  map[string]*appsv1.Deployment
	statefulSets map[string]*appsv1.StatefulSet
	services     map[string]*corev1.Service
	secrets      map[string]*corev1.Secret
	accounts     map[string]*corev1.ServiceAccount
	hpas         map[string]*autoscalingv2.HorizontalPodAutoscaler
	pdbs         map[string]*policyv1.PodDisruptionBudget
	policies     map[string]*networkingv1.NetworkPolicy
	monitors     map[string]*monitoringv1.ServiceMonitor
	rules        map[string]*monitoringv1.PrometheusRule
	databases    map[string]*cnpgv1.Cluster
}

// pager is the receivers a production release must have (the operator's
// own values file gives them); the tests render production with them but
// where they test their absence.
var pager = []string{"alertmanager.receivers.page.webhook_configs[0].url=https://pager.example/v2/enqueue",
	"alertmanager.receivers.watchdog.webhook_configs[0].url=https://deadman.example/ping/partner-api"}

// testXPub stands for an operator's deposit wallet's public key.
const testXPub = "xpub6Ex3Vd8YwdGC6rJaTqNsbbHoRyKk8qYLDeUmL1rbBMd5PobJFD5z6mHgNcTPhFfgL8ghoAW1dFV6QTqNRhKuqNu9LDhHs8UKvbLVbLVz8qN"

// helmTemplate runs helm template with a values file and --set pairs.
func helmTemplate(t *testing.T, values string, set ...string) ([]byte, error) {
	t.Helper()
	if _, err := exec.LookPath("helm"); err != nil {
		t.Fatalf("helm is not on PATH (go install helm.sh/helm/v3/cmd/helm@v3.22.0): %v", err)
	}
	args := []string{"template", "pa", chart, "-f", filepath.Join(chart, values), "--namespace", "partner", "--set", "image.tag=v-check"}
	if values == "values-sandbox.yaml" {
		// An operator's own deposit wallet (the chart has none to give).
		args = append(args, "--set", "chain.depositXPub="+testXPub)
	}
	for _, kv := range set {
		if js, ok := strings.CutPrefix(kv, "json:"); ok {
			args = append(args, "--set-json", js)
			continue
		}
		args = append(args, "--set", kv)
	}
	return exec.Command("helm", args...).Output()
}

// render runs helm template with a values file (production with the pager)
// and decodes every document strictly: a field the official type does not
// have fails the test.
func render(t *testing.T, values string, set ...string) rendered {
	t.Helper()
	if values == "values-production.yaml" {
		set = append(slices.Clone(pager), set...)
	}
	out, err := helmTemplate(t, values, set...)
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("helm template -f %s: %v\n%s", values, err, stderr)
	}
	r := rendered{map[string]*appsv1.Deployment{}, map[string]*appsv1.StatefulSet{}, map[string]*corev1.Service{}, map[string]*corev1.Secret{},
		map[string]*corev1.ServiceAccount{}, map[string]*autoscalingv2.HorizontalPodAutoscaler{}, map[string]*policyv1.PodDisruptionBudget{},
		map[string]*networkingv1.NetworkPolicy{}, map[string]*monitoringv1.ServiceMonitor{}, map[string]*monitoringv1.PrometheusRule{},
		map[string]*cnpgv1.Cluster{}}
	for _, doc := range strings.Split(string(out), "\n---") {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%s: not YAML: %v\n%s", values, err, doc)
		}
		// The API server's schema (kubeconform's too) refuses a null where
		// a list or an object belongs; Go's decoder would take it as empty.
		if bytes.Contains(js, []byte(":null")) {
			t.Errorf("%s: a null in the manifest (a field rendered empty):\n%s", values, doc)
		}
		var head struct {
			APIVersion, Kind string
			Metadata         struct{ Name string }
		}
		if err := json.Unmarshal(js, &head); err != nil {
			t.Fatal(err)
		}
		var dst any
		switch head.APIVersion + " " + head.Kind {
		case "apps/v1 Deployment":
			dst = put(r.deployments, head.Metadata.Name)
		case "apps/v1 StatefulSet":
			dst = put(r.statefulSets, head.Metadata.Name)
		case "v1 Service":
			dst = put(r.services, head.Metadata.Name)
		case "v1 Secret":
			dst = put(r.secrets, head.Metadata.Name)
		case "v1 ServiceAccount":
			dst = put(r.accounts, head.Metadata.Name)
		case "autoscaling/v2 HorizontalPodAutoscaler":
			dst = put(r.hpas, head.Metadata.Name)
		case "policy/v1 PodDisruptionBudget":
			dst = put(r.pdbs, head.Metadata.Name)
		case "networking.k8s.io/v1 NetworkPolicy":
			dst = put(r.policies, head.Metadata.Name)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			dst = put(r.monitors, head.Metadata.Name)
		case "monitoring.coreos.com/v1 PrometheusRule":
			dst = put(r.rules, head.Metadata.Name)
		case "postgresql.cnpg.io/v1 Cluster":
			dst = put(r.databases, head.Metadata.Name)
		default:
			t.Fatalf("%s: a %s %s the test does not know", values, head.APIVersion, head.Kind)
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(dst); err != nil {
			t.Errorf("%s: %s %s does not decode strictly into its official type: %v", values, head.Kind, head.Metadata.Name, err)
		}
	}
	return r
}

func put[T any](m map[string]*T, name string) *T {
	v := new(T)
	m[name] = v
	return v
}

func stripComments(doc string) string {
	var out []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func env(c corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

func TestTheChartKeepsItsPromises(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		values  string
		sandbox bool
	}{{"values-sandbox.yaml", true}, {"values-production.yaml", false}} {
		t.Run(tt.values, func(t *testing.T) {
			r := render(t, tt.values)
			want := []string{"consent", "fiat", "gateway", "orders", "payout"}
			if tt.sandbox {
				want = append(want, "sandboxbank")
			}
			var got []string
			for name := range r.deployments {
				got = append(got, strings.TrimPrefix(name, "pa-partner-api-"))
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("deployments %v, want %v (the sandbox bank only in sandbox)", got, want)
			}
			checkAlertmanager(t, r, !tt.sandbox)
			var longestGrace time.Duration
			for _, b := range devstack.Binaries {
				longestGrace = max(longestGrace, b.Grace)
			}
			for _, name := range want {
				full := "pa-partner-api-" + name
				d := r.deployments[full]
				checkPod(t, name, d.Spec.Template.Spec, longestGrace)
				if _, ok := r.services[full]; !ok {
					t.Errorf("%s: no Service", name)
				}
				if pdb, ok := r.pdbs[full]; !ok || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
					t.Errorf("%s: no PodDisruptionBudget of one pod at a time", name)
				}
				if _, ok := r.policies[full]; !ok {
					t.Errorf("%s: no NetworkPolicy", name)
				}
				if d.Spec.Template.Annotations["prometheus.io/scrape"] != "true" {
					t.Errorf("%s: not annotated for scraping", name)
				}
				for _, c := range d.Spec.Template.Spec.Containers {
					for _, e := range c.Env {
						if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
							sec := e.ValueFrom.SecretKeyRef.Name
							if s, rendered := r.secrets[sec]; rendered && len(s.Data[e.ValueFrom.SecretKeyRef.Key]) < config.MinSecretLen {
								t.Errorf("%s: %s from Secret %s is shorter than %d", name, e.Name, sec, config.MinSecretLen)
							} else if !rendered && tt.sandbox && !madeByTheOperator(r, sec) {
								t.Errorf("%s: %s from Secret %s, which the sandbox release does not create", name, e.Name, sec)
							}
						}
					}
				}
			}
			checkGateway(t, r, tt.sandbox)
			checkNetwork(t, r)
			checkDatabase(t, r)
			if tt.sandbox {
				red := r.statefulSets["pa-partner-api-redis"]
				if red == nil || !slices.Contains(red.Spec.Template.Spec.Containers[0].Args, "noeviction") || len(red.Spec.VolumeClaimTemplates) != 1 {
					t.Error("the sandbox Redis may evict, or is not on a volume")
				}
			} else {
				checkMonitoring(t, r)
			}
		})
	}
}

func checkPod(t *testing.T, name string, pod corev1.PodSpec, longestGrace time.Duration) {
	t.Helper()
	// Replicas spread over nodes and zones, never left pending for it.
	var keys []string
	for _, c := range pod.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.ScheduleAnyway && c.LabelSelector != nil && c.LabelSelector.MatchLabels["app.kubernetes.io/component"] == name {
			keys = append(keys, c.TopologyKey)
		}
	}
	if !slices.Equal(keys, []string{"kubernetes.io/hostname", "topology.kubernetes.io/zone"}) {
		t.Errorf("%s: replicas are not spread over nodes and zones: %+v", name, pod.TopologySpreadConstraints)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("%s: pods may run as root", name)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s: the service account token is mounted", name)
	}
	drain := 5 * time.Second
	if pod.TerminationGracePeriodSeconds == nil || time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second <= drain+longestGrace {
		t.Errorf("%s: terminationGracePeriodSeconds %v is not above drain %s plus grace %s", name, pod.TerminationGracePeriodSeconds, drain, longestGrace)
	}
	for _, c := range pod.Containers {
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("%s: container is not read-only with every capability dropped: %+v", name, sc)
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/health" {
			t.Errorf("%s: no liveness probe on /health", name)
		}
		if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/ready" || c.ReadinessProbe.HTTPGet.Port.String() != "admin" {
			t.Errorf("%s: no readiness probe on the admin /ready that shutdown turns off", name)
		}
		// GOMEMLIMIT is 90% of the memory limit, as in compose: the rest is
		// what the Go runtime does not count.
		want := fmt.Sprintf("%dMiB", c.Resources.Limits.Memory().Value()*9/10>>20)
		if gc, _ := env(c, "GOGC"); gc.Value != "400" {
			t.Errorf("%s: GOGC %q, want 400 under its GOMEMLIMIT", name, gc.Value)
		}
		if gm, _ := env(c, "GOMEMLIMIT"); gm.Value != want {
			t.Errorf("%s: GOMEMLIMIT %q, want %s (90%% of the %s limit)", name, gm.Value, want, c.Resources.Limits.Memory())
		}
		if c.ReadinessProbe != nil && c.ReadinessProbe.FailureThreshold < 2 {
			t.Errorf("%s: one failed readiness probe takes the pod out", name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: no CPU request or memory limit", name)
		}
	}
}

func checkGateway(t *testing.T, r rendered, sandbox bool) {
	t.Helper()
	d := r.deployments["pa-partner-api-gateway"]
	c := d.Spec.Template.Spec.Containers[0]
	replicas, ok := env(c, "GATEWAY_REPLICAS")
	if !ok {
		t.Error("the gateway does not know how many replicas share a key's rate")
	}
	if kf, _ := env(c, "GATEWAY_KEYS_FILE"); kf.Value != "/etc/partnerapi/keys/keys.json" {
		t.Errorf("keys file %q", kf.Value)
	}
	vols := d.Spec.Template.Spec.Volumes
	if len(vols) != 1 || vols[0].Secret == nil {
		t.Error("the keys file is not mounted from a Secret")
	}
	hpa, hasHPA := r.hpas["pa-partner-api-gateway"]
	switch {
	case sandbox && hasHPA:
		t.Error("the sandbox values scale the gateway")
	case sandbox:
		if replicas.Value != fmt.Sprint(*d.Spec.Replicas) {
			t.Errorf("GATEWAY_REPLICAS %s, replicas %d", replicas.Value, *d.Spec.Replicas)
		}
	case !hasHPA || hpa.Spec.ScaleTargetRef.Name != d.Name:
		t.Error("no HorizontalPodAutoscaler on the gateway")
	default:
		if d.Spec.Replicas != nil {
			t.Error("under an HPA the Deployment must not set replicas")
		}
		if replicas.Value != fmt.Sprint(*hpa.Spec.MinReplicas) {
			t.Errorf("GATEWAY_REPLICAS %s, the HPA's minimum %d", replicas.Value, *hpa.Spec.MinReplicas)
		}
	}
}

// checkNetwork: everything is denied by default; only the gateway (and, for
// consent, fiat) reaches a service's main port.
func checkNetwork(t *testing.T, r rendered) {
	t.Helper()
	deny := r.policies["pa-partner-api-default-deny"]
	if deny == nil || len(deny.Spec.Ingress) != 0 || !slices.Contains(deny.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Fatal("no default-deny NetworkPolicy")
	}
	ports := map[string]int{"payout": 8081, "fiat": 8082, "consent": 8083, "orders": 8084}
	for name, port := range ports {
		np := r.policies["pa-partner-api-"+name]
		var from []string
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				if p.Port.IntValue() != port {
					continue
				}
				for _, peer := range rule.From {
					if peer.PodSelector == nil {
						t.Errorf("%s: its port is open to more than pods of the release", name)
						continue
					}
					from = append(from, peer.PodSelector.MatchLabels["app.kubernetes.io/component"])
				}
				if len(rule.From) == 0 {
					t.Errorf("%s: its port is open to anyone", name)
				}
			}
		}
		want := []string{"gateway"}
		if name == "consent" {
			want = []string{"gateway", "fiat"}
		}
		if !slices.Equal(from, want) {
			t.Errorf("%s is reached by %v, want %v", name, from, want)
		}
	}
}

// madeByTheOperator reports whether a Secret is one CloudNativePG makes
// for a Cluster of the release (its app Secret).
func madeByTheOperator(r rendered, secret string) bool {
	for name := range r.databases {
		if secret == name+"-app" {
			return true
		}
	}
	return false
}

// checkDatabase: the system of record is a CloudNativePG Cluster whose
// commits wait for a synchronous standby, and the services that keep
// records (only they) take DATABASE_URL from its app Secret and may reach
// its pods.
func checkDatabase(t *testing.T, r rendered) {
	t.Helper()
	db := r.databases["pa-partner-api-db"]
	if db == nil {
		t.Fatal("no CloudNativePG Cluster")
	}
	sync := db.Spec.PostgresConfiguration.Synchronous
	if db.Spec.Instances < 2 || sync == nil || sync.Number < 1 || sync.Number >= db.Spec.Instances ||
		sync.DataDurability != cnpgv1.DataDurabilityLevelRequired || db.Spec.PostgresConfiguration.Parameters["synchronous_commit"] != "on" {
		t.Errorf("the database does not commit synchronously to a standby: %d instances, %+v, synchronous_commit %q",
			db.Spec.Instances, sync, db.Spec.PostgresConfiguration.Parameters["synchronous_commit"])
	}
	for _, name := range []string{"gateway", "payout", "fiat", "consent"} {
		c := r.deployments["pa-partner-api-"+name].Spec.Template.Spec.Containers[0]
		url, ok := env(c, "DATABASE_URL")
		keeps := name != "gateway"
		if ok != keeps {
			t.Errorf("%s: DATABASE_URL set %v, want %v", name, ok, keeps)
			continue
		}
		if keeps && (url.ValueFrom == nil || url.ValueFrom.SecretKeyRef == nil || url.ValueFrom.SecretKeyRef.Name != db.Name+"-app" || url.ValueFrom.SecretKeyRef.Key != "uri") {
			t.Errorf("%s: DATABASE_URL is not the Cluster's app Secret's uri: %+v", name, url)
		}
		reaches := false
		for _, rule := range r.policies["pa-partner-api-"+name].Spec.Egress {
			for _, peer := range rule.To {
				if peer.PodSelector != nil && peer.PodSelector.MatchLabels["cnpg.io/cluster"] == db.Name {
					reaches = true
				}
			}
		}
		if reaches != keeps {
			t.Errorf("%s: may reach the database %v, want %v", name, reaches, keeps)
		}
	}
}

// checkMonitoring: a ServiceMonitor per service whose job label is the
// service name, and the alert rules of deploy/prometheus, which pass
// promtool.
func checkMonitoring(t *testing.T, r rendered) {
	t.Helper()
	for _, name := range []string{"gateway", "payout", "fiat", "consent"} {
		m := r.monitors["pa-partner-api-"+name]
		if m == nil || m.Spec.JobLabel != "partnerapi.io/job" || r.services["pa-partner-api-"+name].Labels["partnerapi.io/job"] != name {
			t.Errorf("%s: no ServiceMonitor giving job=%q", name, name)
		}
	}
	rule := r.rules["pa-partner-api"]
	if rule == nil {
		t.Fatal("no PrometheusRule")
	}
	b, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("promtool", "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("the rendered alert rules do not pass promtool: %v\n%s", err, out)
	}
	src, _ := os.ReadFile("../../deploy/prometheus/rules/partner-api.yml")
	var want struct{ Groups []monitoringv1.RuleGroup }
	if err := yaml.Unmarshal(src, &want); err != nil {
		t.Fatal(err)
	}
	if len(want.Groups) != len(rule.Spec.Groups) {
		t.Fatalf("the PrometheusRule has %d groups, deploy/prometheus %d", len(rule.Spec.Groups), len(want.Groups))
	}
	for i := range want.Groups {
		if len(want.Groups[i].Rules) != len(rule.Spec.Groups[i].Rules) {
			t.Errorf("group %s: %d rules, deploy/prometheus %d", want.Groups[i].Name, len(rule.Spec.Groups[i].Rules), len(want.Groups[i].Rules))
		}
	}
}

// With tls.enabled the services serve their main port over TLS from the
// Secret, their probes speak HTTPS, and the gateway (and fiat, for
// consent) reach them by https:// URLs, trusting the Secret's CA.
func TestTheChartTurnsOnTLSToTheServices(t *testing.T) {
	t.Parallel()
	r := render(t, "values-production.yaml", "tls.enabled=true", "tls.secretName=pa-tls")
	for _, name := range []string{"payout", "fiat", "consent"} {
		pod := r.deployments["pa-partner-api-"+name].Spec.Template.Spec
		c := pod.Containers[0]
		cert, _ := env(c, "TLS_CERT_FILE")
		key, _ := env(c, "TLS_KEY_FILE")
		if cert.Value != "/etc/partnerapi/tls/tls.crt" || key.Value != "/etc/partnerapi/tls/tls.key" {
			t.Errorf("%s: not serving TLS (%q, %q)", name, cert.Value, key.Value)
		}
		if c.LivenessProbe.HTTPGet.Scheme != corev1.URISchemeHTTPS || c.StartupProbe.HTTPGet.Scheme != corev1.URISchemeHTTPS {
			t.Errorf("%s: probes speak plain HTTP to a TLS port", name)
		}
		if !slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Secret.SecretName == "pa-tls" }) {
			t.Errorf("%s: the TLS Secret is not mounted", name)
		}
	}
	gw := r.deployments["pa-partner-api-gateway"].Spec.Template.Spec.Containers[0]
	fiat := r.deployments["pa-partner-api-fiat"].Spec.Template.Spec.Containers[0]
	for _, c := range []corev1.Container{gw, fiat} {
		if ca, _ := env(c, "UPSTREAM_CA_FILE"); ca.Value != "/etc/partnerapi/tls/ca.crt" {
			t.Errorf("%s does not trust the services' CA", c.Name)
		}
	}
	for _, v := range []string{"PAYOUT_URL", "FIAT_URL", "CONSENT_URL"} {
		if u, _ := env(gw, v); !strings.HasPrefix(u.Value, "https://") {
			t.Errorf("gateway %s = %q", v, u.Value)
		}
	}
	if u, _ := env(fiat, "CONSENT_URL"); !strings.HasPrefix(u.Value, "https://") {
		t.Errorf("fiat CONSENT_URL = %q", u.Value)
	}
}

// checkAlertmanager: the release routes its alerts with the repository's
// routing (amtool accepts the rendered configuration), from a Secret, in a
// read-only non-root pod.
func checkAlertmanager(t *testing.T, r rendered, production bool) {
	t.Helper()
	d, ok := r.statefulSets["pa-partner-api-alertmanager"]
	sec := r.secrets["pa-partner-api-alertmanager"]
	if !ok || sec == nil || r.services["pa-partner-api-alertmanager"] == nil || r.services["pa-partner-api-alertmanager-peers"] == nil {
		t.Fatal("no Alertmanager (StatefulSet, Service, the peers' Service and its configuration's Secret)")
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot ||
		c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("Alertmanager may run as root or write its root file system")
	}
	if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds < 10 {
		t.Errorf("Alertmanager's terminationGracePeriodSeconds %v: it has no time to hand over", pod.TerminationGracePeriodSeconds)
	}
	var peers []string
	for _, a := range c.Args {
		if p, ok := strings.CutPrefix(a, "--cluster.peer="); ok {
			peers = append(peers, p)
		}
	}
	if production {
		// Two replicas that know each other, spread, one drained at a time.
		want := []string{"pa-partner-api-alertmanager-0.pa-partner-api-alertmanager-peers.partner.svc:9094",
			"pa-partner-api-alertmanager-1.pa-partner-api-alertmanager-peers.partner.svc:9094"}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 || !slices.Equal(peers, want) || d.Spec.ServiceName != "pa-partner-api-alertmanager-peers" {
			t.Errorf("production Alertmanager: %v replicas, peers %v, service %q; want 2 clustered replicas", d.Spec.Replicas, peers, d.Spec.ServiceName)
		}
		if pdb := r.pdbs["pa-partner-api-alertmanager"]; pdb == nil || pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Error("production Alertmanager: no PodDisruptionBudget of one pod at a time")
		}
		if len(pod.TopologySpreadConstraints) != 2 {
			t.Errorf("production Alertmanager: replicas not spread over nodes and zones: %+v", pod.TopologySpreadConstraints)
		}
		if np := r.policies["pa-partner-api-alertmanager"]; np == nil || len(np.Spec.Ingress) != 2 {
			t.Error("production Alertmanager: its NetworkPolicy does not let the replicas gossip")
		}
	} else if len(peers) != 0 || !slices.Contains(c.Args, "--cluster.listen-address=") {
		t.Errorf("a single Alertmanager must not listen for peers: %v", c.Args)
	}
	cfg := sec.Data["alertmanager.yml"]
	var routing struct {
		Route struct {
			GroupBy []string `json:"group_by"`
		} `json:"route"`
		Receivers []struct {
			Name string `json:"name"`
		} `json:"receivers"`
	}
	if err := yaml.Unmarshal(cfg, &routing); err != nil || !slices.Contains(routing.Route.GroupBy, "upstream") || len(routing.Receivers) != 3 {
		t.Errorf("the rendered routing is not the repository's: %v\n%s", err, cfg)
	}
	amtool, err := exec.LookPath("amtool")
	if err != nil {
		t.Fatal("amtool is not on PATH (Debian's prometheus-alertmanager package; .ci/run installs it)")
	}
	f := filepath.Join(t.TempDir(), "alertmanager.yml")
	if err := os.WriteFile(f, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(amtool, "check-config", f).CombinedOutput(); err != nil {
		t.Errorf("amtool refuses the rendered configuration: %v\n%s", err, out)
	}
}

// A production release that could page nobody does not render: without a
// page receiver, or without the watchdog's dead man's switch, helm template
// fails naming the value. With both, the rendered routing delivers them.
func TestProductionRefusesAnEmptyPagerPath(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		set  []string
		want string
	}{
		{"no receivers", nil, "alertmanager.receivers.page delivers nowhere"},
		{"no watchdog", pager[:1], "alertmanager.receivers.watchdog delivers nowhere"},
		{"no page", pager[1:], "alertmanager.receivers.page delivers nowhere"},
		// A receiver that renders, passes amtool and delivers nowhere.
		{"a page with a name only", append([]string{"alertmanager.receivers.page.name=page"}, pager[1:]...), "alertmanager.receivers.page delivers nowhere"},
		{"a page with no webhook", append([]string{`json:alertmanager.receivers.page={"webhook_configs":[]}`}, pager[1:]...), "alertmanager.receivers.page delivers nowhere"},
		{"a page with an empty webhook", append([]string{`json:alertmanager.receivers.page={"webhook_configs":[{}]}`}, pager[1:]...), "alertmanager.receivers.page delivers nowhere"},
		{"a watchdog with an empty list", append([]string{`json:alertmanager.receivers.watchdog={"pagerduty_configs":[],"email_configs":null}`}, pager[:1]...), "alertmanager.receivers.watchdog delivers nowhere"},
		// What amtool refuses (Alertmanager would crash-loop on it), and a
		// watchdog that is the pager itself.
		{"an empty url", append([]string{`json:alertmanager.receivers.page={"webhook_configs":[{"url":""}]}`}, pager[1:]...), `alertmanager.receivers.page.webhook_configs[0].url "" is not an absolute http(s) URL`},
		{"a url that is no URL", append([]string{"alertmanager.receivers.page.webhook_configs[0].url=pager"}, pager[1:]...), `alertmanager.receivers.page.webhook_configs[0].url "pager" is not an absolute http(s) URL`},
		{"an empty routing key", append([]string{`json:alertmanager.receivers.page={"pagerduty_configs":[{"routing_key":""}]}`}, pager[1:]...), "alertmanager.receivers.page.pagerduty_configs[0].routing_key is empty"},
		{"a watchdog that is the pager", []string{pager[0], "alertmanager.receivers.watchdog.webhook_configs[0].url=https://pager.example/v2/enqueue"}, "alertmanager.receivers.watchdog.webhook_configs[0].url is the page receiver's own"},
	} {
		_, err := helmTemplate(t, "values-production.yaml", tt.set...)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(string(ee.Stderr), tt.want) {
			t.Errorf("%s: helm template %v, want a failure naming %q", tt.name, err, tt.want)
		}
	}
	r := render(t, "values-production.yaml")
	var routing struct {
		Receivers []map[string]any `json:"receivers"`
	}
	if err := yaml.Unmarshal(r.secrets["pa-partner-api-alertmanager"].Data["alertmanager.yml"], &routing); err != nil {
		t.Fatal(err)
	}
	for _, rc := range routing.Receivers {
		if name := rc["name"]; (name == "page" || name == "watchdog") && rc["webhook_configs"] == nil {
			t.Errorf("the %s receiver delivers nowhere: %v", name, rc)
		}
	}
	if out, err := helmTemplate(t, "values-sandbox.yaml"); err != nil {
		t.Errorf("the sandbox needs no pager: %v %s", err, out)
	}
}

// TestTheChartTakesWhatOperatorsNeed: monitoring objects carry the labels
// a kube-prometheus-stack Prometheus selects; a Redis URL (which may hold
// a password) reaches the pods from a Secret, never as a plain value.
func TestTheChartTakesWhatOperatorsNeed(t *testing.T) {
	t.Parallel()
	r := render(t, "values-production.yaml", "redis.existingSecret=", "redis.url=redis://:hunter2hunter2@redis:6379/0")
	for name, m := range r.monitors {
		if m.Labels["release"] != "kube-prometheus-stack" {
			t.Errorf("ServiceMonitor %s: labels %v, want release: kube-prometheus-stack", name, m.Labels)
		}
	}
	for name, pr := range r.rules {
		if pr.Labels["release"] != "kube-prometheus-stack" {
			t.Errorf("PrometheusRule %s: labels %v", name, pr.Labels)
		}
	}
	if len(r.monitors) == 0 || len(r.rules) == 0 {
		t.Fatal("no ServiceMonitor or PrometheusRule rendered")
	}
	for _, name := range []string{"gateway", "payout"} {
		c := r.deployments["pa-partner-api-"+name].Spec.Template.Spec.Containers[0]
		e, ok := env(c, "REDIS_URL")
		if !ok || e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			t.Errorf("%s: REDIS_URL %+v, want it from a Secret", name, e)
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if got := string(r.secrets[ref.Name].Data[ref.Key]); got != "redis://:hunter2hunter2@redis:6379/0" {
			t.Errorf("%s: REDIS_URL's Secret %s/%s holds %q", name, ref.Name, ref.Key, got)
		}
	}
}

// TestTheProviderIsReachedOnlyWhereListed: in production the services
// reach the bank provider only at the CIDRs networkPolicy.bankProviderTo
// lists; with none listed (the production values), nowhere on its port.
func TestTheProviderIsReachedOnlyWhereListed(t *testing.T) {
	t.Parallel()
	toProvider := func(r rendered, name string) []networkingv1.NetworkPolicyPeer {
		np := r.policies["pa-partner-api-"+name]
		if np == nil {
			t.Fatalf("%s: no NetworkPolicy", name)
		}
		for _, e := range np.Spec.Egress {
			for _, p := range e.Ports {
				if p.Port != nil && p.Port.IntValue() == 443 {
					if len(e.To) == 0 {
						t.Errorf("%s: egress to 443 anywhere", name)
					}
					return e.To
				}
			}
		}
		return nil
	}
	none := render(t, "values-production.yaml")
	listed := render(t, "values-production.yaml", "networkPolicy.bankProviderTo[0].ipBlock.cidr=203.0.113.0/24")
	for _, name := range []string{"payout", "fiat", "consent", "orders"} {
		if to := toProvider(none, name); to != nil {
			t.Errorf("%s: egress to the provider with no CIDR listed: %+v", name, to)
		}
		if to := toProvider(listed, name); len(to) != 1 || to[0].IPBlock == nil || to[0].IPBlock.CIDR != "203.0.113.0/24" {
			t.Errorf("%s: egress to the provider %+v, want the listed CIDR", name, to)
		}
	}
}

// TestTheSandboxBankNotifiesThroughTheGateway: in the sandbox, the sandbox
// bank's signed notifications reach the payout service as a real
// provider's would, through the gateway's public route: it is told the
// gateway's Service, may reach the gateway's pods on their port, and the
// gateway takes it even where its port is open only to listed peers.
func TestTheSandboxBankNotifiesThroughTheGateway(t *testing.T) {
	t.Parallel()
	r := render(t, "values-sandbox.yaml", "gateway.ingressFrom[0].ipBlock.cidr=10.0.0.0/8")
	bank := r.deployments["pa-partner-api-sandboxbank"]
	if bank == nil {
		t.Fatal("no sandbox bank in the sandbox")
	}
	if e, _ := env(bank.Spec.Template.Spec.Containers[0], "SANDBOXBANK_NOTIFY_URL"); e.Value != "http://pa-partner-api-gateway:80/provider/notifications" {
		t.Errorf("SANDBOXBANK_NOTIFY_URL = %q, want the gateway Service's /provider/notifications", e.Value)
	}
	reaches := false
	for _, rule := range r.policies["pa-partner-api-sandboxbank"].Spec.Egress {
		for _, p := range rule.Ports {
			for _, peer := range rule.To {
				if p.Port.IntValue() == 8080 && peer.PodSelector != nil && peer.PodSelector.MatchLabels["app.kubernetes.io/component"] == "gateway" {
					reaches = true
				}
			}
		}
	}
	if !reaches {
		t.Error("the sandbox bank's NetworkPolicy lets it reach no gateway pod on 8080")
	}
	var from []string
	for _, rule := range r.policies["pa-partner-api-gateway"].Spec.Ingress {
		if len(rule.Ports) == 1 && rule.Ports[0].Port.IntValue() == 8080 {
			for _, peer := range rule.From {
				if peer.PodSelector != nil {
					from = append(from, peer.PodSelector.MatchLabels["app.kubernetes.io/component"])
				}
			}
		}
	}
	if !slices.Equal(from, []string{"sandboxbank"}) {
		t.Errorf("the gateway's port, open to listed peers, takes pods %v, want the sandbox bank", from)
	}
}

// TestTheChainsReachThePayoutService: the payout service is given the
// deposit wallet's public key (required in the sandbox: the chart refuses
// to render without it), each chain's RPC URL, and may reach the RPC nodes
// only where networkPolicy.chainRpcTo lists them.
func TestTheChainsReachThePayoutService(t *testing.T) {
	t.Parallel()
	args := []string{"template", "pa", chart, "-f", filepath.Join(chart, "values-sandbox.yaml"), "--set", "image.tag=v-check"}
	if out, err := exec.Command("helm", args...).CombinedOutput(); err == nil || !strings.Contains(string(out), "chain.depositXPub is required in the sandbox") {
		t.Errorf("a sandbox without a deposit key rendered: %v %.300s", err, out)
	}
	r := render(t, "values-sandbox.yaml", "chain.rpcUrls.84532=https://sepolia.base.org", "chain.confirmations=84532:3",
		"networkPolicy.chainRpcTo[0].ipBlock.cidr=198.51.100.0/24")
	c := r.deployments["pa-partner-api-payout"].Spec.Template.Spec.Containers[0]
	for k, want := range map[string]string{"DEPOSIT_XPUB": testXPub, "CHAIN_RPC_URL_84532": "https://sepolia.base.org", "CHAIN_CONFIRMATIONS": "84532:3"} {
		if e, _ := env(c, k); e.Value != want {
			t.Errorf("payout's %s = %q, want %q", k, e.Value, want)
		}
	}
	reaches := false
	for _, e := range r.policies["pa-partner-api-payout"].Spec.Egress {
		for _, p := range e.Ports {
			if p.Port.IntValue() == 8545 && len(e.To) == 1 && e.To[0].IPBlock != nil && e.To[0].IPBlock.CIDR == "198.51.100.0/24" {
				reaches = true
			}
		}
	}
	if !reaches {
		t.Error("the payout service's NetworkPolicy does not let it reach the listed RPC nodes")
	}
}

// TestTheGatewayTrustsOnlyTheListedProxies: the chart passes
// gateway.trustedProxies to GATEWAY_TRUSTED_PROXIES, and with none listed
// sets nothing (the connection's address is the caller's).
func TestTheGatewayTrustsOnlyTheListedProxies(t *testing.T) {
	t.Parallel()
	gateway := func(r rendered) corev1.Container {
		return r.deployments["pa-partner-api-gateway"].Spec.Template.Spec.Containers[0]
	}
	if e, ok := env(gateway(render(t, "values-production.yaml")), "GATEWAY_TRUSTED_PROXIES"); ok {
		t.Errorf("no proxies listed, yet GATEWAY_TRUSTED_PROXIES=%q", e.Value)
	}
	r := render(t, "values-production.yaml", "json:gateway.trustedProxies=[\"10.42.0.0/16\",\"fd00:42::/56\"]")
	if e, _ := env(gateway(r), "GATEWAY_TRUSTED_PROXIES"); e.Value != "10.42.0.0/16,fd00:42::/56" {
		t.Errorf("GATEWAY_TRUSTED_PROXIES=%q", e.Value)
	}
}
