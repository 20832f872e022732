package bankprovider

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/obs"
)

// Operations of the provider client: the closed set of values of the
// operation label.
const (
	opCreateCustomer     = "create_customer"
	opCustomer           = "get_customer"
	opCreateTerms        = "create_terms_session"
	opTerms              = "get_terms_session"
	opForceIdentity      = "force_identity"
	opCreateVirtual      = "create_virtual_account"
	opCreateDeposit      = "create_deposit_instruction"
	opTransactions       = "list_transactions"
	opDepositTransaction = "list_deposit_transactions"
	opSimulateDeposit    = "simulate_deposit"

	opCreateCardOrder     = "create_card_order"
	opCardOrder           = "get_card_order"
	opCreateCardSession   = "create_card_session"
	opSimulateCardDeposit = "simulate_card_deposit"

	opCreatePayout = "create_payout"
	opPayout       = "get_payout"
	opCheckPayee   = "check_payee"
	opChanges      = "list_changes"
)

// Outcomes of one attempt: the closed set of values of the outcome label.
const (
	outcomeOK      = "ok"      // 2xx
	outcomeRefused = "refused" // 4xx: the provider answered, and said no
	outcomeError   = "error"   // 5xx, an undecodable answer, or a network error
	outcomeTimeout = "timeout" // the attempt ran out of time
)

// metrics are the client's series: one per attempt (so a retried call
// counts each try), by operation and outcome, and its duration.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	retries  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: obs.Namespace, Subsystem: "bankprovider", Name: "requests_total",
			Help: "Calls to the bank provider (each attempt), by operation and outcome (ok, refused, error, timeout).",
		}, []string{"operation", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: obs.Namespace, Subsystem: "bankprovider", Name: "request_duration_seconds",
			Help:    "Time one attempt at the bank provider took, by operation.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15},
		}, []string{"operation"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: obs.Namespace, Subsystem: "bankprovider", Name: "retries_total",
			Help: "Attempts at the bank provider that repeated a failed one, by operation.",
		}, []string{"operation"}),
	}
	reg.MustRegister(m.requests, m.duration, m.retries)
	// Every series exists from the start: a quiet provider reads 0, not
	// "no data", on the dashboard and in the alert.
	for _, op := range []string{opCreateCustomer, opCustomer, opCreateTerms, opTerms, opForceIdentity,
		opCreateVirtual, opCreateDeposit, opTransactions, opDepositTransaction, opSimulateDeposit,
		opCreateCardOrder, opCardOrder, opCreateCardSession, opSimulateCardDeposit, opCreatePayout, opPayout, opCheckPayee, opChanges} {
		for _, outcome := range []string{outcomeOK, outcomeRefused, outcomeError, outcomeTimeout} {
			m.requests.WithLabelValues(op, outcome)
		}
		m.duration.WithLabelValues(op)
		m.retries.WithLabelValues(op)
	}
	return m
}

// observe records one attempt that ended with status (0 when none came)
// and err after d.
func (m *metrics) observe(op string, attempt, status int, err error, d time.Duration) {
	if m == nil {
		return
	}
	outcome := outcomeOK
	switch {
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		outcome = outcomeTimeout
	case err != nil || status >= 500:
		outcome = outcomeError
	case status >= 400:
		outcome = outcomeRefused
	}
	m.requests.WithLabelValues(op, outcome).Inc()
	m.duration.WithLabelValues(op).Observe(d.Seconds())
	if attempt > 0 {
		m.retries.WithLabelValues(op).Inc()
	}
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
