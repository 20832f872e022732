package consent

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/consentapi"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/hostedlink"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// provider is the bank: it remembers the return address of the last link
// and keeps each terms session's status, which decide sets.
type provider struct {
	back     string
	last     string
	sessions map[string]string
}

func (p *provider) CreateTermsSession(_ context.Context, customerID, returnURL string) (bankprovider.TermsSession, error) {
	for id, st := range p.sessions {
		if st == "open" {
			p.sessions[id] = "superseded"
		}
	}
	p.back = returnURL
	p.last = "ts_" + strconv.Itoa(len(p.sessions)+1)
	p.sessions[p.last] = "open"
	return bankprovider.TermsSession{ID: p.last, URL: "http://bank.test/consent/" + customerID}, nil
}

func (p *provider) TermsSession(_ context.Context, id string) (bankprovider.TermsSession, error) {
	return bankprovider.TermsSession{ID: id, Status: p.sessions[id]}, nil
}

// decide is the user on the hosted page of the last link.
func (p *provider) decide(result string) { p.sessions[p.last] = result }

var acme = partner.Caller{KeyID: "acme"}

// setupOn is the service on db, with a stand-in provider and a clock the
// test moves.
func setupOn(db *database.DB, env environment.Name) (Service, *provider, *time.Time) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	p := &provider{sessions: map[string]string{}}
	s := NewService(env, NewStore(db, env), p, []byte("consent-secret-0123456789"), "http://gw.test/consent/return", func() time.Time { return now })
	return s, p, &now
}

// setupIn is the service on a fresh database.
func setupIn(t *testing.T, env environment.Name) (Service, *provider, *time.Time) {
	return setupOn(pgtest.Open(t, Feed.Migrations(), Migrations), env)
}

func setup(t *testing.T) (Service, *provider, *time.Time) { return setupIn(t, environment.Sandbox) }

func create(t *testing.T, s Service, owner, accountID, customerID string) string {
	t.Helper()
	out, err := s.CreateSession(context.Background(), consentapi.CreateSession{Owner: owner, AccountID: accountID, ProviderCustomerID: customerID})
	if err != nil || out.State != StatePending {
		t.Fatalf("create session: %+v %v", out, err)
	}
	return out.ConsentSessionID
}

func code(err error) string {
	if err == nil {
		return ""
	}
	e, _ := envelope.From(err)
	return string(e.Code)
}

func stateOf(t *testing.T, back string) string {
	t.Helper()
	u, err := url.Parse(back)
	if err != nil || !strings.HasPrefix(back, "http://gw.test/consent/return?state=") {
		t.Fatalf("return address %q", back)
	}
	return u.Query().Get("state")
}

func TestLinkReturnStatus(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, Feed.Migrations(), Migrations)
	testLinkReturnStatus(t, db)
}

func testLinkReturnStatus(t *testing.T, db *database.DB) {
	s, p, _ := setupOn(db, environment.Sandbox)
	ctx := context.Background()
	id := create(t, s, "acme", "acc_1", "cus_1")
	if st, _ := s.Status(ctx, acme, StatusRequest{ConsentSessionID: id}); st.State != StatePending {
		t.Fatalf("new session is %s", st.State)
	}
	l, err := s.Link(ctx, acme, LinkRequest{ConsentSessionID: id, ReturnURL: "https://partner.test/done?x=1"})
	if err != nil || l.Link != "http://bank.test/consent/cus_1" {
		t.Fatalf("%+v %v", l, err)
	}
	state := stateOf(t, p.back)
	if _, err := s.Return(ctx, state); code(err) != "invalid_request" || !strings.Contains(err.Error(), "no decision") {
		t.Fatalf("back before deciding: %v", err)
	}
	p.decide("accepted")
	out, err := s.Return(ctx, state)
	if err != nil || out.Redirect != "https://partner.test/done?consentSessionId="+id+"&result=accepted&x=1" {
		t.Fatalf("%+v %v", out, err)
	}
	if st, _ := s.Status(ctx, acme, StatusRequest{ConsentSessionID: id}); st.State != StateReturned {
		t.Fatalf("after return the session is %s", st.State)
	}
	if got, _ := s.Session(ctx, "acme", id); got.Result != "accepted" {
		t.Errorf("the recorded result is %q", got.Result)
	}
	if _, err := s.Return(ctx, state); code(err) != "return_link_expired" || !strings.Contains(err.Error(), "already used") {
		t.Errorf("a second redemption: %v", err)
	}
}

// A declined consent stays declined whatever the browser's redirect says:
// the outcome is read back from the provider.
func TestTheOutcomeIsTheProvidersWord(t *testing.T) {
	t.Parallel()
	s, p, _ := setup(t)
	ctx := context.Background()
	id := create(t, s, "acme", "acc_1", "cus_1")
	s.Link(ctx, acme, LinkRequest{ConsentSessionID: id, ReturnURL: "https://partner.test/done"})
	p.decide("declined")
	out, err := s.Return(ctx, stateOf(t, p.back))
	if err != nil || out.Result != "declined" || out.Redirect != "https://partner.test/done?consentSessionId="+id+"&result=declined" {
		t.Fatalf("%+v %v", out, err)
	}
	if got, _ := s.Session(ctx, "acme", id); got.Result != "declined" {
		t.Errorf("the recorded result is %q", got.Result)
	}
}

func TestAFreshLinkKillsEarlierOnes(t *testing.T) {
	t.Parallel()
	s, p, _ := setup(t)
	ctx := context.Background()
	id := create(t, s, "acme", "acc_1", "cus_1")
	s.Link(ctx, acme, LinkRequest{ConsentSessionID: id})
	first := stateOf(t, p.back)
	s.Link(ctx, acme, LinkRequest{ConsentSessionID: id})
	second := stateOf(t, p.back)
	if _, err := s.Return(ctx, first); code(err) != "return_link_expired" {
		t.Fatalf("the earlier link's return: %v", err)
	}
	p.decide("accepted")
	if out, err := s.Return(ctx, second); err != nil || out.Result != "accepted" {
		t.Fatalf("the fresh link's return: %+v %v", out, err)
	}
}

func TestReturnURLRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		env environment.Name
		url string
		ok  bool
	}{
		{environment.Sandbox, "https://partner.example/done?x=1", true},
		{environment.Production, "https://partner.example/done", true},
		{environment.Sandbox, "http://127.0.0.1:3000/done", true},
		{environment.Sandbox, "http://localhost:3000/done", true},
		{environment.Sandbox, "http://[::1]:3000/done", true},
		{environment.Production, "http://127.0.0.1:3000/done", false},
		{environment.Sandbox, "http://partner.example/done", false},
		{environment.Sandbox, "https://user:pass@partner.example/done", false},
		{environment.Sandbox, "https://partner.example/" + strings.Repeat("a", 2048), false},
		{environment.Sandbox, "javascript:alert(1)", false},
		{environment.Sandbox, "ftp://partner.example/", false},
		{environment.Sandbox, "//partner.example/done", false},
		{environment.Sandbox, "https:partner.example", false},
	} {
		s, _, _ := setupIn(t, tt.env)
		id := create(t, s, "acme", "acc_1", "cus_1")
		_, err := s.Link(ctx, acme, LinkRequest{ConsentSessionID: id, ReturnURL: tt.url})
		if (err == nil) != tt.ok {
			t.Errorf("%s %.60s: %v, want ok=%v", tt.env, tt.url, err, tt.ok)
		}
	}
}

func TestStateCannotBeForgedOrOutlived(t *testing.T) {
	t.Parallel()
	s, p, now := setup(t)
	ctx := context.Background()
	id := create(t, s, "acme", "acc_1", "cus_1")
	s.Link(ctx, acme, LinkRequest{ConsentSessionID: id})
	state := stateOf(t, p.back)
	p.decide("accepted")
	for _, bad := range []string{"", "x", state + "A", strings.Replace(state, ".", ".AAAA", 1), "YXR0XzEuOTk5OTk5OTk5OQ.c2ln", strings.Repeat("A", 1<<20)} {
		if _, err := s.Return(ctx, bad); err == nil || !strings.Contains(err.Error(), "not valid") {
			t.Errorf("state %.40q: %v", bad, err)
		}
	}
	*now = now.Add(hostedlink.ReturnLife + time.Second)
	if _, err := s.Return(ctx, state); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("a late state: %v", err)
	}
	if st, _ := s.Status(ctx, acme, StatusRequest{ConsentSessionID: id}); st.State != StatePending {
		t.Error("a refused return marked the session")
	}
}
func TestForeignAndMissingSessions(t *testing.T) {
	t.Parallel()
	s, _, _ := setup(t)
	ctx := context.Background()
	id := create(t, s, "globex", "acc_1", "cus_1")
	for _, req := range []string{id, "cs_unknown"} {
		if _, err := s.Status(ctx, acme, StatusRequest{ConsentSessionID: req}); code(err) != "consent_session_not_found" {
			t.Errorf("status of %s: %v", req, err)
		}
		if _, err := s.Link(ctx, acme, LinkRequest{ConsentSessionID: req}); code(err) != "consent_session_not_found" {
			t.Errorf("link of %s: %v", req, err)
		}
	}
	if _, err := s.Status(ctx, acme, StatusRequest{}); code(err) != "invalid_request" {
		t.Errorf("empty id: %v", err)
	}
	if _, err := s.Link(ctx, acme, LinkRequest{ConsentSessionID: id, ReturnURL: "javascript:alert(1)"}); code(err) != "invalid_request" {
		t.Errorf("a script URL as returnUrl: %v", err)
	}
}
