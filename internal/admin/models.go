package admin

import (
	"net/http"
	"time"

	"gatehouse/internal/llm"
	routing "gatehouse/internal/route"
)

// modelView is one model of GET /admin/models: how it routes and the live
// state of each deployment behind it. It shows no base URL and no
// credential.
type modelView struct {
	Model       string           `json:"model"`
	Strategy    string           `json:"strategy"`
	Mode        string           `json:"mode"`
	Fallbacks   []string         `json:"fallbacks"`
	Discovered  bool             `json:"discovered"`
	Deployments []deploymentView `json:"deployments"`
}

type deploymentView struct {
	Provider string `json:"provider"`
	Type     string `json:"type"`
	Model    string `json:"model"`
	Local    bool   `json:"local"`
	Weight   int    `json:"weight"`
	// Allowed is false when the model's routing mode never picks it (a
	// cloud deployment under local_only, say).
	Allowed bool `json:"allowed"`
	// Down: the active health check fails (false without a health check).
	Down bool `json:"down"`
	// HealthChecked: the provider has a health check and it has reported,
	// so a deployment not down passes it.
	HealthChecked bool        `json:"health_checked"`
	Breaker       breakerView `json:"breaker"`
	CoolingUntil  *time.Time  `json:"cooling_until"` // a Retry-After the upstream asked for, while it runs
	// LatencyMS is the moving average of time to first byte; null before
	// the first answer.
	LatencyMS *float64 `json:"latency_ms"`
	// Attempts, Failures and ErrorRate count the breaker's window of
	// WindowSeconds; ErrorRate is null with no attempt in it, and all are
	// zero or null when the breaker keeps no window.
	Attempts         int      `json:"attempts"`
	Failures         int      `json:"failures"`
	ErrorRate        *float64 `json:"error_rate"`
	WindowSeconds    float64  `json:"window_seconds"`
	InFlightRequests int64    `json:"in_flight_requests"`
	InFlightTokens   int64    `json:"in_flight_tokens"`
}

type breakerView struct {
	State string     `json:"state"` // closed | open | half_open
	Since *time.Time `json:"since"` // when it opened; null while closed
	Until *time.Time `json:"until"` // when an open breaker lets a probe through
}

var errNoRoutes = &llm.Error{Kind: llm.KindNotImplemented, Status: http.StatusNotImplemented, Type: "invalid_request_error",
	Code: "not_implemented", Message: "This gateway does not report its routing state."}

// noParameters refuses any query parameter: these endpoints take none.
func noParameters(r *http.Request) error {
	for name := range r.URL.Query() {
		return llm.BadRequest(name, "unknown_parameter", "%s: unknown query parameter (this endpoint takes none).", name)
	}
	return nil
}

// getModels serves GET /admin/models.
func (h *Handler) getModels(r *http.Request) (int, any, error) {
	if h.o.Routes == nil {
		return 0, nil, errNoRoutes
	}
	if err := noParameters(r); err != nil {
		return 0, nil, err
	}
	models := h.o.Routes()
	out := list[modelView]{Object: "list", Data: make([]modelView, 0, len(models))}
	for _, m := range models {
		out.Data = append(out.Data, model(m))
	}
	return http.StatusOK, out, nil
}

// getModel serves GET /admin/models/{model}: one model by the name
// clients send.
func (h *Handler) getModel(r *http.Request) (int, any, error) {
	if h.o.Routes == nil && h.o.Route == nil {
		return 0, nil, errNoRoutes
	}
	if err := noParameters(r); err != nil {
		return 0, nil, err
	}
	name := r.PathValue("model")
	if h.o.Route != nil {
		if m, ok := h.o.Route(name); ok {
			return http.StatusOK, model(m), nil
		}
		return 0, nil, notFoundError("model", name)
	}
	for _, m := range h.o.Routes() {
		if m.Name == name {
			return http.StatusOK, model(m), nil
		}
	}
	return 0, nil, notFoundError("model", name)
}

func model(m routing.ModelState) modelView {
	v := modelView{Model: m.Name, Strategy: m.Strategy, Mode: m.Mode, Fallbacks: m.Fallbacks, Discovered: m.Discovered,
		Deployments: make([]deploymentView, 0, len(m.Deployments))}
	if v.Fallbacks == nil {
		v.Fallbacks = []string{}
	}
	for _, d := range m.Deployments {
		v.Deployments = append(v.Deployments, deployment(d))
	}
	return v
}

func deployment(d routing.DeploymentState) deploymentView {
	v := deploymentView{Provider: d.Provider, Type: d.Type, Model: d.Model, Local: d.Local, Weight: d.Weight,
		Allowed: d.Allowed, Down: d.Down, HealthChecked: d.HealthChecked, Breaker: breakerView{State: d.Breaker.String()},
		CoolingUntil: timeOrNil(d.CoolingUntil), Attempts: d.Attempts, Failures: d.Failures,
		WindowSeconds: d.Window.Seconds(), InFlightRequests: d.InFlightRequests, InFlightTokens: d.InFlightTokens}
	v.Breaker.Since, v.Breaker.Until = timeOrNil(d.BreakerSince), timeOrNil(d.BreakerUntil)
	if d.HasLatency {
		ms := float64(d.Latency) / float64(time.Millisecond)
		v.LatencyMS = &ms
	}
	if d.Attempts > 0 {
		rate := float64(d.Failures) / float64(d.Attempts)
		v.ErrorRate = &rate
	}
	return v
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
