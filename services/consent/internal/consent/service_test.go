package consent

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/consentapi"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/partner"
)

type memStore struct {
	mu       sync.Mutex
	sessions map[string]Record
	attempts map[string]Attempt
}

func (m *memStore) Save(_ context.Context, r Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sessions[r.ID] = r
	return nil
}
func (m *memStore) Get(_ context.Context, id string) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.sessions[id]
	if !ok {
		return r, ErrNotFound
	}
	return r, nil
}
func (m *memStore) SaveAttempt(_ context.Context, id string, a Attempt, _ time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.attempts[id] = a
	return nil
}
func (m *memStore) TakeAttempt(_ context.Context, id string) (Attempt, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.attempts[id]
	if !ok {
		return a, ErrNotFound
	}
	delete(m.attempts, id)
	return a, nil
}

// provider remembers the return address of the last link.
type provider struct{ back string }

func (p *provider) CreateTermsSession(_ context.Context, customerID, returnURL string) (bankprovider.TermsSession, error) {
	p.back = returnURL
	return bankprovider.TermsSession{URL: "http://bank.test/consent/ts_" + customerID}, nil
}

var acme = partner.Caller{KeyID: "acme"}

func setup() (Service, *provider, *time.Time) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	p := &provider{}
	s := NewService(&memStore{sessions: map[string]Record{}, attempts: map[string]Attempt{}}, p,
		[]byte("consent-secret-0123456789"), "http://gw.test/consent/return", func() time.Time { return now })
	return s, p, &now
}

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
	s, p, _ := setup()
	ctx := context.Background()
	id := create(t, s, "acme", "acc_1", "cus_1")
	if st, _ := s.Status(ctx, acme, StatusRequest{ConsentSessionID: id}); st.State != StatePending {
		t.Fatalf("new session is %s", st.State)
	}
	l, err := s.Link(ctx, acme, LinkRequest{ConsentSessionID: id, ReturnURL: "https://partner.test/done?x=1"})
	if err != nil || l.Link != "http://bank.test/consent/ts_cus_1" {
		t.Fatalf("%+v %v", l, err)
	}
	state := stateOf(t, p.back)
	out, err := s.Return(ctx, state, "accepted")
	if err != nil || out.Redirect != "https://partner.test/done?consentSessionId="+id+"&result=accepted&x=1" {
		t.Fatalf("%+v %v", out, err)
	}
	if st, _ := s.Status(ctx, acme, StatusRequest{ConsentSessionID: id}); st.State != StateReturned {
		t.Fatalf("after return the session is %s", st.State)
	}
	if _, err := s.Return(ctx, state, "accepted"); code(err) != "return_link_expired" || !strings.Contains(err.Error(), "already used") {
		t.Errorf("a second redemption: %v", err)
	}
}

func TestStateCannotBeForgedOrOutlived(t *testing.T) {
	s, p, now := setup()
	ctx := context.Background()
	id := create(t, s, "acme", "acc_1", "cus_1")
	s.Link(ctx, acme, LinkRequest{ConsentSessionID: id})
	state := stateOf(t, p.back)
	for _, bad := range []string{"", "x", state + "A", strings.Replace(state, ".", ".AAAA", 1), "YXR0XzEuOTk5OTk5OTk5OQ.c2ln"} {
		if _, err := s.Return(ctx, bad, "accepted"); err == nil || !strings.Contains(err.Error(), "not valid") {
			t.Errorf("state %q: %v", bad, err)
		}
	}
	*now = now.Add(ReturnLife + time.Second)
	if _, err := s.Return(ctx, state, "accepted"); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("a late state: %v", err)
	}
	if st, _ := s.Status(ctx, acme, StatusRequest{ConsentSessionID: id}); st.State != StatePending {
		t.Error("a refused return marked the session")
	}
}

func TestForeignAndMissingSessions(t *testing.T) {
	s, _, _ := setup()
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
