package obs

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/envelope"
)

// Operations counts a service's operations by outcome: "ok", or the wire
// code of the error ("internal" for anything unexpected).
type Operations struct{ vec *prometheus.CounterVec }

// NewOperations registers partnerapi_<subsystem>_operations_total on reg.
func NewOperations(reg prometheus.Registerer, subsystem string) *Operations {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: "operations_total",
		Help: "Operations of the " + subsystem + " service, by operation and outcome (ok or the wire error code).",
	}, []string{"operation", "outcome"})
	reg.MustRegister(vec)
	return &Operations{vec: vec}
}

// Count records one operation.
func (o *Operations) Count(operation string, err error) {
	outcome := envelope.CodeOf(err)
	if outcome == "" {
		outcome = "ok"
	}
	o.vec.WithLabelValues(operation, outcome).Inc()
}
